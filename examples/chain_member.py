"""A member that sub-delegates: the privacy team asks the legal team, through the owner.

The privacy team's ``review-privacy`` skill: given ``{"text": "...", "terms": [...]}``
it asks the legal team's ``check-terms`` (``examples/terms_member.py``) which required
terms the text uses, with a child of its own delegation token that the run's owner
mints by token exchange (``member_kit.trust.chain.delegate``), and answers with the
legal team's findings and its own verdict. The legal team's receipt for its task goes up
with the answer without a line of this file: the kit keeps it and carries it in the
artifact's metadata (the receipts extension's ``hops``), the owner checks it with the
legal team's pinned key before it admits the answer, and the run's proof bundle holds it
for anyone holding that key. Its card asks for both scopes, since it passes
``terms:check`` on: the owner never mints a child wider than its parent.

Run it next to a coordinator that serves the API, and the legal team's member::

    python examples/chain_member.py --port 8092 --data-dir ./privacy-data \\
        --trust-issuer urn:a2a-federation:coordinator=http://127.0.0.1:8080/.well-known/jwks.json \\
        --exchange-url http://127.0.0.1:8080/token-exchange --terms-agent legal-terms

See docs/delegation-token.md (token exchange) and docs/bring-your-own-agent.md.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from agent_cards.documents import with_base_url
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts.grant import Budget
from contracts.wire import AgentCard, TaskState
from member_kit.settings import MemberSettings
from member_kit.skill import Member, Outcome
from member_kit.telemetry.names import TelemetryNames
from member_kit.trust.chain import ChainRefused, delegate, half_budget

SKILL_ID = "review-privacy"
SCOPES = ["privacy:review", "terms:check"]
TERMS_SKILL = "check-terms"
DEFAULT_TERMS_AGENT = "legal-terms"
# It reports as privacy_review: privacy_review_* metrics, PRIVACY_REVIEW_* variables.
NAME = "privacy_review"
# The bearer token this member's audit routes (GET /audit/...) ask for; unset: not served.
AUDIT_TOKEN_ENV_VAR = TelemetryNames.of(NAME).env_prefix + "AUDIT_TOKEN"
MIN_REFRESH_ENV_VAR = TelemetryNames.of(NAME).env_prefix + "JWKS_MIN_REFRESH_SECONDS"


class ReviewPrivacy:
    """Asks the legal team (a third agent) and reports: in the background."""

    skill_id = SKILL_ID
    artifact_name = "privacy-review"
    artifact_description = "The legal team's terms check and the privacy verdict."
    input_hint = " holding text and terms"
    immediate = False
    needs_budget = False

    def __init__(self, terms_agent: str = DEFAULT_TERMS_AGENT) -> None:
        self.terms_agent = terms_agent

    def input_problems(self, data: Any) -> list[str]:
        if not isinstance(data, dict) or set(data) != {"text", "terms"}:
            return ["must be a JSON object with exactly the keys text and terms"]
        if not isinstance(data["text"], str) or not isinstance(data["terms"], list):
            return ["text must be a string and terms a list"]
        return []

    def run(self, data: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError("review-privacy runs in the background only")

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        ask = {"text": data["text"], "terms": data["terms"]}
        try:
            task = await delegate(self.terms_agent, TERMS_SKILL, ask, budget=half_budget(budget))
        except ChainRefused as refused:
            cause = f"asking {self.terms_agent}: {refused}"
            return Outcome(TaskState.FAILED, self.failure(refused.reason, cause))
        state = task.get("status", {}).get("state")
        if state != "TASK_STATE_COMPLETED":
            cause = f"{self.terms_agent} ended {state}"
            return Outcome(TaskState.FAILED, self.failure("sub_delegation_failed", cause))
        terms = task["artifacts"][0]["parts"][0]["data"]
        verdict = "clear" if not terms.get("missing") else "terms_missing"
        return Outcome(TaskState.COMPLETED, {"verdict": verdict, "terms": terms})

    def failure(self, code: str, message: str) -> dict[str, Any]:
        """A failed Finding: the coordinator reads its error code (``remote_failed:CODE``)."""
        return {"status": "failed", "summary": message, "errorCode": code}


CARD: dict[str, Any] = {
    "name": "privacy-review",
    "description": "The privacy team's specialist: asks the legal team, then gives a verdict.",
    "supportedInterfaces": [
        {"url": "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ],
    "provider": {"organization": "Privacy team", "url": "https://privacy-team.example/"},
    "version": "0.1.0",
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "extensions": [
            {"uri": RECEIPTS_EXTENSION_URI, "description": "A receipt with every terminal task."}
        ],
    },
    "securitySchemes": {
        "delegation": {
            "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "bearerFormat": "JWT",
                "description": "A delegation token for this agent, bound to one handoff.",
            }
        }
    },
    "securityRequirements": [{"schemes": {"delegation": {"list": []}}}],
    "defaultInputModes": ["application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [
        {
            "id": SKILL_ID,
            "name": "Review privacy",
            "description": 'Input: one data part {"text": "...", "terms": ["..."]}. '
            "Asks the legal team's check-terms (sub-delegation).",
            "tags": ["privacy"],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
            "securityRequirements": [{"schemes": {"delegation": {"list": SCOPES}}}],
        }
    ],
}


def privacy_card(base_url: str) -> AgentCard:
    return with_base_url(AgentCard.model_validate(CARD), base_url)


def member(terms_agent: str = DEFAULT_TERMS_AGENT) -> Member:
    return Member(NAME, ReviewPrivacy(terms_agent), privacy_card)


def settings_from(args: argparse.Namespace) -> MemberSettings:
    from member_kit.trust import issuers as trust

    directory = trust.data_dir(args.data_dir, os.environ)
    trusted = trust.load_trusted_issuers(
        args.trust_issuer,
        min_interval=trust.min_refresh_seconds(os.environ, MIN_REFRESH_ENV_VAR),
    )
    keys = trust.signing_keys(None, directory)
    return MemberSettings(
        trusted_issuers=trusted,
        data_dir=directory,
        signing_keys=keys,
        exchange_url=args.exchange_url,
        audit_token=os.environ.get(AUDIT_TOKEN_ENV_VAR) or None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="the privacy team's review-privacy member")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--trust-issuer", action="append", required=True)
    parser.add_argument("--exchange-url", required=True)
    parser.add_argument("--terms-agent", default=DEFAULT_TERMS_AGENT)
    args = parser.parse_args()
    from member_kit.server.app import serve

    serve(args.host, args.port, settings=settings_from(args), member=member(args.terms_agent))


if __name__ == "__main__":
    main()
