"""The credentials the coordinator fetches an agent's extended card with.

``GetExtendedAgentCard`` is answered to authenticated callers only, with a scheme the
public card declares: ours is the delegation token. The token for it is minted like a
handoff's (narrowed from a root grant of the operator's authority, bound to a handoff of
its own, ``extended-card``, with no budget and a one-minute lease, audience the agent's
identity, :attr:`RegisteredAgent.agent_id`: the thumbprint URI of the pinned key that
verified its card, never a URL the card names; the principal is the registration's own,
``run:registration-...``), so the agent verifies it exactly as a dispatch;
only the scopes the card asks for its first skill are requested. A card without our
scheme gets no token.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from agent_cards.keys import KeySet
from contracts.handoff import HandoffBudget, HandoffRecord
from coordinator.authority.delegator import (
    Delegator,
    RunAuthority,
    envelope_of,
    required_scopes,
)
from coordinator.remote.cards.registered_agent import RegisteredAgent

CARD_HANDOFF = "extended-card"
CARD_LEASE_SECONDS = 60
# Fetching a card spends nothing: every dimension, model figures included, is zero.
NO_BUDGET = HandoffBudget(actions=0, context_units=0, effects=0, model_requests=0, model_tokens=0)


def card_caller(keys: KeySet, issuer: str) -> Callable[[RegisteredAgent], dict[str, str]]:
    """Headers for fetching ``agent``'s extended card: a bearer delegation token, or none."""

    def headers(agent: RegisteredAgent) -> dict[str, str]:
        card = agent.agent_card
        skill = card.skills[0].id if card.skills else ""
        scopes = required_scopes(card, skill) if skill else None
        if not scopes:
            return {}
        run_id = f"registration-{uuid.uuid4().hex[:12]}"
        authority = RunAuthority(scopes=scopes)
        delegator = Delegator(keys, authority, issuer, run_id)
        lease = datetime.now(UTC) + timedelta(seconds=CARD_LEASE_SECONDS)
        record = HandoffRecord(
            handoff_id=CARD_HANDOFF,
            run_id=run_id,
            source="coordinator",
            target=agent.name,
            skill=skill,
            final_owner="coordinator",
            budget=NO_BUDGET,
            lease_expires_at=lease,
            duplicate_key=f"{run_id}:{CARD_HANDOFF}",
        )
        minted = delegator.mint(record, agent.agent_id, scopes, remaining=envelope_of(NO_BUDGET))
        return {"Authorization": f"Bearer {minted.token}"}

    return headers
