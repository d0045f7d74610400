"""What a returned artifact comes to: the verdicts, the record kept of one, and the rule
that decides it from the handoff's authoritative state (pure: the book applies it).

A result is judged only if its handoff is still where the result was cut from: one that
lost the race to a cancel is ``late_after_cancel``, to a lease expiry ``late_after_lease``,
one for a duplicate key already completed ``duplicate``, one cut from an older state of
the run ``stale``; only then does its return admission decide (admitted, rejected, or
held for review when no contract could judge it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from contracts.handoff import HandoffRecord, HandoffState

S = HandoffState


class ArtifactDecision(StrEnum):
    ADMITTED = "admitted"
    REJECTED = "rejected"
    # Kept with its hash and size, not admitted: the handoff declared no return contract.
    HELD_FOR_REVIEW = "held_for_review"
    STALE = "stale"
    LATE_AFTER_CANCEL = "late_after_cancel"
    LATE_AFTER_LEASE = "late_after_lease"
    DUPLICATE = "duplicate"


# The verdicts of a return admission (the others are the race's, named by themselves).
JUDGED = (ArtifactDecision.ADMITTED, ArtifactDecision.REJECTED, ArtifactDecision.HELD_FOR_REVIEW)

# Where a verdict moves its handoff, and why (given the return admission's reason).
Move = Callable[[ArtifactDecision, str], tuple[HandoffState, str]]


@dataclass(frozen=True)
class ArtifactRecord:
    """What was received for a handoff and what the coordinator decided about it."""

    handoff_id: str
    attempt: int
    decision: ArtifactDecision
    reason: str
    content_hash: str
    size: int
    received_at: datetime
    content: object = None
    # The return contract it was judged by (its name, e.g. ``finding``).
    contract: str = ""


def decide(
    current: HandoffRecord,
    based_on: HandoffRecord,
    admitted: bool,
    *,
    completed: bool,
    state_version: int,
) -> ArtifactDecision:
    """The verdict on a result cut from ``based_on``, the handoff now being ``current``
    (``completed``: its duplicate key completed already; ``state_version``: the run's)."""
    if current.version != based_on.version or current.terminal:
        if current.state is S.CANCELLED:
            return ArtifactDecision.LATE_AFTER_CANCEL
        if current.state is S.TIMED_OUT:
            return ArtifactDecision.LATE_AFTER_LEASE
        return ArtifactDecision.DUPLICATE
    if completed:
        return ArtifactDecision.DUPLICATE
    seen = current.state_ref.version if current.state_ref else None
    if seen != state_version:
        return ArtifactDecision.STALE
    return ArtifactDecision.ADMITTED if admitted else ArtifactDecision.REJECTED


def verdict_facts(
    artifact: ArtifactRecord, judged: str, remote_task_id: str | None
) -> dict[str, object]:
    """What the ledger records of an artifact's verdict (``judged``: the return
    admission's own reason, which ``reason`` replaces when the race decided)."""
    return {
        "reason": artifact.reason,
        "judged": judged,
        "content_hash": artifact.content_hash,
        "size": artifact.size,
        "contract": artifact.contract,
        "remote_task_id": remote_task_id,
    }
