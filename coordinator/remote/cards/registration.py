"""What a registration does: a new card registered, adopted, or held for the operator.

A card fetched and verified again is ``unchanged`` or ``updated`` when it asks for what
the registered one did, ``narrowed`` (adopted at once) when it only asks for less, and
held as ``pending_approval`` (``approved`` with ``--approve``) when it asks for more or is
verified by a key the operator gives anew. Applied by
:class:`coordinator.remote.cards.registry.Registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from coordinator.remote.cards.card_changes import only_narrows, surface
from coordinator.remote.cards.card_verification import keys_from
from coordinator.remote.cards.registered_agent import RegisteredAgent

Status = Literal["registered", "unchanged", "updated", "narrowed", "approved", "pending_approval"]


@dataclass(frozen=True)
class Registration:
    agent: RegisteredAgent
    status: Status


def status_of(
    existing: RegisteredAgent | None, new: RegisteredAgent, approve: bool, pinned: bool
) -> Status:
    """What a registration does: a card verified by a key the operator gives anew (not a
    key pinned before, nor one a pinned key vouched for) is held like a wider card."""
    if existing is None:
        return "registered"
    if not pinned and new.verified_kid not in keys_from(existing.pinned_jwks):
        return "approved" if approve else "pending_approval"
    if surface(existing.agent_card) == surface(new.agent_card):
        return "unchanged" if existing.card == new.card else "updated"
    if only_narrows(existing.agent_card, new.agent_card):
        return "narrowed"
    return "approved" if approve else "pending_approval"
