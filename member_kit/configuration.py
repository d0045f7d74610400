"""What configuration a member refuses to run with, checked before it serves anyone.

A member without a trusted issuer would accept every caller, so it refuses to start
unless told that is on purpose (``--insecure-anonymous``, and then says so on stderr); an
audit or metrics token too weak to be a secret is refused too. The variables named in
the refusals are the member's own (:mod:`member_kit.telemetry.names`:
``REMOTE_RISK_METRICS_TOKEN`` for remote_risk, ``GUARD_METRICS_TOKEN`` for the guard).
"""

from __future__ import annotations

from agent_cards.edge.errors import WeakOperatorToken
from agent_cards.edge.operator_token import check_strength
from member_kit.errors import ConfigurationError
from member_kit.settings import MemberSettings
from member_kit.telemetry.names import REMOTE_RISK, TelemetryNames
from member_kit.trust.issuers import TRUST_ENV_VAR

__all__ = ["check_operator_tokens", "check_secure", "insecure_warning"]


def insecure_warning(name: str) -> str:
    """What the member ``name`` says on stderr when it runs without trusted issuers."""
    return (
        f"WARNING: {name} runs with --insecure-anonymous: no delegation token is checked and "
        "every caller is accepted. For development only."
    )


def check_secure(settings: MemberSettings, names: TelemetryNames = REMOTE_RISK) -> None:
    """Refuse a configuration that would serve every caller without a token by accident
    (the variables named are the member's, under ``names``' prefix)."""
    if not settings.trusted_issuers and not settings.insecure_anonymous:
        raise ConfigurationError(
            "no trusted issuer configured; pass --trust-issuer ISSUER=JWKS_FILE_OR_URL"
            f"{_trust_variable_hint(names)}, or --insecure-anonymous for development"
        )
    check_operator_tokens(settings, names)


def _trust_variable_hint(names: TelemetryNames) -> str:
    """The variable trusted issuers may come from instead, for the one member whose
    command reads one (remote_risk: ``REMOTE_RISK_TRUST_ISSUERS``)."""
    variable = names.env_prefix + "TRUST_ISSUERS"
    return f" (or {variable})" if variable == TRUST_ENV_VAR else ""


def check_operator_tokens(settings: MemberSettings, names: TelemetryNames = REMOTE_RISK) -> None:
    """Refuse an audit or metrics token too weak to be a secret (never echoing it), named
    by the member's variable (``REMOTE_RISK_METRICS_TOKEN`` for remote_risk)."""
    tokens = (
        (names.env_prefix + "AUDIT_TOKEN", settings.audit_token),
        (names.env_prefix + "METRICS_TOKEN", settings.metrics_token),
    )
    for name, token in tokens:
        try:
            if token is not None:
                check_strength(token, name)
        except WeakOperatorToken as exc:
            raise ConfigurationError(f"{exc.reason}: {exc.message}") from None
