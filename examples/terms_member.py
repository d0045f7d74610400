"""A second member of the federation, built on the member kit in one file.

The legal team's ``check-terms`` skill: given ``{"text": "...", "terms": ["...", ...]}`` it
says which terms the text uses and which it lacks. Everything else a member must do
(verify each delegation token, bind tasks to their handoff, sign receipts, keep the
decision log and its audit routes, publish its keys, hold the edge's limits, serve
JSON-RPC and HTTP+JSON) is the kit's: this file is the skill, the card, and flags.

Run it next to a coordinator (its JWK Set by file or URL)::

    python examples/terms_member.py --port 8091 --data-dir /tmp/terms \\
        --trust-issuer coordinator=http://127.0.0.1:8080/.well-known/jwks.json

then, on the coordinator's side, with the kid it prints::

    federation register http://127.0.0.1:8091 --expect-kid=KID \\
        --return-schema check-terms=examples/terms_schema.json
    federation delegate --to legal-terms --skill check-terms --input input.json

It reports under its own name, ``legal_terms``: metrics ``legal_terms_*`` on ``/metrics``
(behind ``LEGAL_TERMS_METRICS_TOKEN``), spans ``legal_terms.*`` of service
``legal-terms``, access lines on the ``legal_terms.access`` logger, and its edge limits
and log settings from ``LEGAL_TERMS_*`` variables (``LEGAL_TERMS_MAX_BODY_BYTES``,
``LEGAL_TERMS_LOG_FORMAT``, ``LEGAL_TERMS_JWKS_MIN_REFRESH_SECONDS``, ...).

See docs/bring-your-own-agent.md.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from agent_cards.documents import with_base_url
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts.grant import Budget
from contracts.wire import AgentCard, TaskState
from member_kit.command import Serve, add_listening_arguments, run_member
from member_kit.settings import MemberSettings
from member_kit.skill import Member, Outcome
from member_kit.telemetry.logs import member_logs
from member_kit.telemetry.names import TelemetryNames

SKILL_ID = "check-terms"
SCOPE = "terms:check"
MAX_TERMS = 100


class CheckTerms:
    """Which of the given terms a text uses: immediate and deterministic."""

    skill_id = SKILL_ID
    artifact_name = "terms-report"
    artifact_description = "Which of the terms the text uses and which it lacks."
    input_hint = " holding text and terms"
    immediate = True
    needs_budget = False

    def input_problems(self, data: Any) -> list[str]:
        if not isinstance(data, dict) or set(data) != {"text", "terms"}:
            return ["must be a JSON object with exactly the keys text and terms"]
        terms = data["terms"]
        if not isinstance(data["text"], str):
            return ["text must be a string"]
        if not isinstance(terms, list) or not all(isinstance(t, str) and t for t in terms):
            return ["terms must be a list of non-empty strings"]
        return [] if len(terms) <= MAX_TERMS else [f"at most {MAX_TERMS} terms"]

    def run(self, data: Mapping[str, Any]) -> Outcome:
        text = data["text"].casefold()
        found = [term for term in data["terms"] if term.casefold() in text]
        missing = [term for term in data["terms"] if term not in found]
        return Outcome(TaskState.COMPLETED, {"found": found, "missing": missing})

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        return self.run(data)

    def failure(self, code: str, message: str) -> dict[str, Any]:
        return {"errorCode": code, "message": message}


CARD: dict[str, Any] = {
    "name": "legal-terms",
    "description": "The legal team's specialist: says which required terms a text uses.",
    "supportedInterfaces": [
        {"url": "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ],
    "provider": {"organization": "Legal team", "url": "https://legal-team.example/"},
    "version": "0.1.0",
    "capabilities": {
        "streaming": True,
        "pushNotifications": True,
        "extensions": [
            {"uri": RECEIPTS_EXTENSION_URI, "description": "A receipt with every terminal task."}
        ],
    },
    "securitySchemes": {
        "delegation": {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "bearerFormat": "JWT",
                "description": "A delegation token for this agent (aud: the RFC 9278 "
                "thumbprint URI of the key that signs this card), bound to one handoff.",
            }
        }
    },
    "securityRequirements": [{"schemes": {"delegation": {"list": []}}}],
    "defaultInputModes": ["application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [
        {
            "id": SKILL_ID,
            "name": "Check terms",
            "description": 'Input: one data part {"text": "...", "terms": ["..."]}. '
            'Output: {"found": [...], "missing": [...]}.',
            "tags": ["legal", "terms"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
            "securityRequirements": [{"schemes": {"delegation": {"list": [SCOPE]}}}],
        }
    ],
}


def terms_card(base_url: str) -> AgentCard:
    return with_base_url(AgentCard.model_validate(CARD), base_url)


MEMBER = Member("legal_terms", CheckTerms(), terms_card)
# Its names: legal_terms_* metrics, the legal_terms.access logger, LEGAL_TERMS_* variables.
NAMES = TelemetryNames.of(MEMBER.name)
# The bearer token GET /metrics asks for; unset: /metrics is not served.
METRICS_TOKEN_ENV_VAR = NAMES.env_prefix + "METRICS_TOKEN"
# The bearer token the audit routes ask for (the coordinator's `audit reconcile`).
AUDIT_TOKEN_ENV_VAR = NAMES.env_prefix + "AUDIT_TOKEN"
# How often, at most, an issuer's keys given by URL are fetched again (seconds).
MIN_REFRESH = "JWKS_MIN_REFRESH_SECONDS"


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> MemberSettings:
    from member_kit.trust import issuers as trust

    directory = trust.data_dir(args.data_dir, environ)
    trusted = trust.load_trusted_issuers(
        args.trust_issuer,
        min_interval=trust.min_refresh_seconds(environ, NAMES.env_prefix + MIN_REFRESH),
    )
    keys = trust.signing_keys(None, directory)
    return MemberSettings(
        trusted_issuers=trusted,
        data_dir=directory,
        signing_keys=keys,
        audit_token=environ.get(AUDIT_TOKEN_ENV_VAR) or None,
        metrics_token=environ.get(METRICS_TOKEN_ENV_VAR) or None,
        grpc_port=args.grpc_port,
        grpc_host=args.host,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the legal team's check-terms member")
    add_listening_arguments(parser)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--trust-issuer", action="append", required=True)
    member_logs(NAMES).add_arguments(parser)
    run_member(MEMBER.name, parser, argv, settings_from, _serve)


def _serve() -> Serve:
    from member_kit.server.app import serve

    return functools.partial(serve, member=MEMBER)


if __name__ == "__main__":
    main()
