"""remote_risk as a member built on the kit: the risk skill and the risk card, composed.

Everything the federation asks of a member (tokens, handoff binding, receipts, the
decision log, keys, limits, the three bindings) is the kit's (:mod:`member_kit`); what is
about risk is the skill (:mod:`remote_risk.risk.skill`, or with a model
:mod:`remote_risk.risk.interpreter`) and the card document ``risk``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_cards.documents import card_for
from contracts.evidence import FindingStatus
from contracts.grant import Budget
from contracts.wire import AgentCard, TaskState, to_wire
from member_kit.errors import SkillFailure
from member_kit.skill import Member, Outcome, run_now
from remote_risk.risk import skill
from remote_risk.risk.model import ModelConfig
from remote_risk.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from member_kit.server.jsonrpc import Authorize

NAME = "remote_risk"
CARD_DOCUMENT = "risk"


class RiskSkill:
    """``interpret-risk-policy``: deterministic, or with ``model`` interpreted by it."""

    skill_id = skill.SKILL_ID
    artifact_name = "risk-finding"
    artifact_description = "The risk policy interpretation for the pilot proposal."
    input_hint = " holding brief and policy_note"

    def __init__(self, model: ModelConfig | None = None) -> None:
        self.model = model

    @property
    def immediate(self) -> bool:
        return self.model is None

    @property
    def needs_budget(self) -> bool:
        return self.model is not None

    def input_problems(self, data: Any) -> list[str]:
        return skill.input_problems(data)

    def run(self, data: Mapping[str, Any]) -> Outcome:
        finding = skill.interpret_risk_policy(data)
        ok = finding.status is FindingStatus.OK
        return Outcome(TaskState.COMPLETED if ok else TaskState.INPUT_REQUIRED, to_wire(finding))

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        if self.model is None:
            return run_now(self, data)
        from remote_risk.risk.interpreter import run_model_skill

        state, finding, usage = await run_model_skill(
            data, self.model, lease_expires_at=lease_expires_at, grant=budget
        )
        return Outcome(state, to_wire(finding), usage)

    def failure(self, code: str, message: str) -> dict[str, Any]:
        data: dict[str, Any] = to_wire(skill.failed_finding(SkillFailure(code, message)))
        return data


def risk_card(public_base_url: str, grpc_address: str | None = None) -> AgentCard:
    """The risk service's card as served from ``public_base_url`` (unsigned)."""
    from member_kit.server.app import member_card

    return member_card(risk_member(), public_base_url, grpc_address)


def risk_member(model: ModelConfig | None = None) -> Member:
    return Member(NAME, RiskSkill(model), lambda base: card_for(CARD_DOCUMENT, base))


def create_app(settings: Settings | None = None, *, authorize: Authorize | None = None) -> FastAPI:
    """remote_risk's app for ``settings`` (in-process use and tests)."""
    from member_kit.server import app

    settings = settings or Settings()
    return app.create_app(settings, risk_member(settings.model), authorize=authorize)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    public_base_url: str | None = None,
    settings: Settings | None = None,
) -> None:
    """Run remote_risk until interrupted (:func:`member_kit.server.app.serve`)."""
    from member_kit.server import app

    settings = settings or Settings()
    member = risk_member(settings.model)
    app.serve(host, port, public_base_url=public_base_url, settings=settings, member=member)
