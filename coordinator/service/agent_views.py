"""Registered agents as the API and the command line show them: list rows, one agent in
full (``agents show``) and the cards held for approval (``agents pending``)."""

from __future__ import annotations

from typing import Any

from agent_cards.keys import KeyMaterialError, TrustedKeys
from coordinator.remote.cards.card_changes import card_diff, surface
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.v03.card import card_model
from coordinator.service.api_models import (
    AgentDetail,
    AgentView,
    CardDiff,
    PendingCard,
    SkillView,
)


def agent_view(agent: RegisteredAgent) -> AgentView:
    return AgentView(
        name=agent.name,
        endpoint=agent.endpoint,
        binding=agent.binding,
        protocol_version=agent.protocol_version,
        extended_card=agent.extended_card is not None,
        card_url=agent.card_url,
        skills=agent.skill_ids(),
        trust=agent.trust,
        verified_kid=agent.verified_kid,
        registered_at=agent.registered_at,
        pending_approval=agent.pending_card is not None,
    )


def agent_detail(agent: RegisteredAgent) -> AgentDetail:
    card = agent.agent_card
    scopes = surface(card)["skills"]
    return AgentDetail(
        **agent_view(agent).model_dump(),
        description=card.description,
        version=card.version,
        pinned_kids=pinned_kids(agent.pinned_jwks),
        identity=agent.known_identity,
        verified_form=agent.verified_form,
        allowed_origins=list(agent.allowed_origins),
        skill_details=[
            SkillView(id=skill.id, name=skill.name, scopes=sorted(scopes[skill.id]))
            for skill in card.skills
        ],
        return_contracts={
            skill: contract.summary() for skill, contract in agent.return_contracts.items()
        },
        pending=pending_card(agent),
    )


def pending_card(agent: RegisteredAgent) -> PendingCard | None:
    if agent.pending_card is None:
        return None
    held = card_model(agent.pending_card)
    return PendingCard(
        agent=agent.name,
        card_url=agent.card_url,
        current_kid=agent.verified_kid,
        held_kid=agent.pending_kid,
        held_trust=agent.pending_trust,
        diff=CardDiff.model_validate(card_diff(agent.agent_card, held)),
        approve=f"federation register {agent.card_url} --name {agent.name} --approve",
    )


def pinned_kids(jwks: dict[str, object]) -> list[str]:
    try:
        return sorted(key.kid for key in TrustedKeys.from_json(jwks))
    except (KeyMaterialError, ValueError):
        return []


def diff_lines(diff: dict[str, Any]) -> list[str]:
    """The diff as ``+``/``-`` lines (``+``: what the held card asks for more)."""
    lines = [f"+ interface {i}" for i in diff["interfaces_added"]]
    lines += [f"- interface {i}" for i in diff["interfaces_removed"]]
    lines += [f"+ skill {s}" for s in diff["skills_added"]]
    lines += [f"- skill {s}" for s in diff["skills_removed"]]
    for skill, scopes in diff["scopes_added"].items():
        lines += [f"+ scope {scope} (skill {skill})" for scope in scopes]
    for skill, scopes in diff["scopes_removed"].items():
        lines += [f"- scope {scope} (skill {skill})" for scope in scopes]
    if diff["security_schemes_changed"]:
        lines.append("~ security schemes changed")
    if diff["security_requirements_changed"]:
        lines.append("~ card-wide security requirements changed")
    return lines or ["= nothing added or dropped"]
