"""``federation serve guard --upstream URL``: run the guard in front of an A2A agent.

``--skill-scope SKILL=SCOPE`` (repeatable) gives the scope each of the upstream's skills
asks of a delegation token; every skill needs one. ``--trust-issuer ISSUER=JWKS_FILE_OR_URL``
(repeatable) names whose delegation tokens are accepted; without one the guard refuses
to start unless ``--insecure-anonymous`` is given. Own keys: ``--key-file FILE``, else
``DATA_DIR/keys``; the decision log, replay record and witnessed heads:
``DATA_DIR/guard.db`` (``remote-risk.db`` if an earlier version left one there; or
``--database-url``). The audit routes and ``/metrics``
ask for the bearer tokens in ``GUARD_AUDIT_TOKEN`` and ``GUARD_METRICS_TOKEN`` (unset:
not served); issuers' keys given by URL are fetched again at most every
``GUARD_JWKS_MIN_REFRESH_SECONDS``. The guard reports as ``guard`` (``guard_*`` metrics,
the ``guard.access`` logger, ``GUARD_LOG_*`` and ``GUARD_*`` edge limits). Configuration
errors end with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from agent_cards.edge.errors import WeakOperatorToken
from agent_cards.edge.token_strength import check_strength
from member_kit.command import Serve, add_listening_arguments, add_trust_arguments, run_member
from member_kit.guard.settings import GuardSettings, parse_skill_scopes
from member_kit.telemetry.logs import member_logs
from member_kit.telemetry.names import TelemetryNames
from member_kit.trust import issuers as trust

NAME = "guard"
AUDIT_TOKEN_ENV_VAR = "GUARD_AUDIT_TOKEN"
METRICS_TOKEN_ENV_VAR = "GUARD_METRICS_TOKEN"
MIN_REFRESH_ENV_VAR = "GUARD_JWKS_MIN_REFRESH_SECONDS"


def build_parser(
    prog: str = "federation serve guard", description: str | None = None, *, upstream: bool = True
) -> argparse.ArgumentParser:
    """The guard's flags; without ``upstream`` (an agent governed in-process,
    :mod:`member_kit.sdk`, named ``prog``) no ``--upstream`` nor ``--skill-scope``. The
    log variables are the member's (``GUARD_LOG_LEVEL`` for the guard)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description or (__doc__ or "").splitlines()[0]
    )
    if upstream:
        parser.add_argument("--upstream", required=True, help="the guarded agent's base URL")
        parser.add_argument(
            "--skill-scope",
            action="append",
            default=[],
            metavar="SKILL=SCOPE",
            help="the scope a token needs for SKILL (repeatable; one per upstream skill)",
        )
    add_listening_arguments(parser)
    add_trust_arguments(parser, data_dir_required=True)
    parser.add_argument("--database-url", help="the database instead of DATA_DIR's")
    member_logs(TelemetryNames.of(NAME if upstream else prog)).add_arguments(parser)
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> GuardSettings:
    """Settings for the parsed flags, or a one-line ``ValueError`` / ``ConfigurationError``."""
    from member_kit.server.app import check_secure

    trusted = trust.load_trusted_issuers(
        trust.issuer_entries(args.trust_issuer, {}),
        min_interval=trust.min_refresh_seconds(environ, MIN_REFRESH_ENV_VAR),
    )
    directory = Path(args.data_dir).expanduser()
    for name in (AUDIT_TOKEN_ENV_VAR, METRICS_TOKEN_ENV_VAR):
        _check_strength(environ.get(name), name)
    upstream = {"upstream_url": args.upstream} if "upstream" in args else {}
    settings = GuardSettings(
        **upstream,
        skill_scopes=parse_skill_scopes(getattr(args, "skill_scope", [])),
        trusted_issuers=trusted,
        insecure_anonymous=args.insecure_anonymous,
        revocation_poll_seconds=args.revocation_poll_seconds,
        data_dir=directory,
        database_url=args.database_url,
        grpc_port=args.grpc_port,
        grpc_host=args.host,
        audit_token=environ.get(AUDIT_TOKEN_ENV_VAR) or None,
        metrics_token=environ.get(METRICS_TOKEN_ENV_VAR) or None,
    )
    check_secure(settings, TelemetryNames.of(settings.member_name))
    return replace(settings, signing_keys=trust.signing_keys(args.key_file, directory))


def _check_strength(token: str | None, name: str) -> None:
    """An operator token too weak to be a secret is refused, named by its variable."""
    try:
        if token:
            check_strength(token, name)
    except WeakOperatorToken as exc:
        raise ValueError(f"{exc.reason}: {exc.message}") from None


def main(argv: Sequence[str] | None = None) -> None:
    run_member(NAME, build_parser(), argv, settings_from, _serve)


def _serve() -> Serve:
    from member_kit.guard.app import serve

    return serve
