"""The handoff record and its state machine.

A handoff is one bounded slice of a run that the coordinator gives to a specialist. Its
local state is the coordinator's own account and never simply mirrors the remote task:
a remote ``COMPLETED`` only makes the handoff ``RETURNED``; whether what came back is
``ACCEPTED`` is the coordinator's return admission to decide, by the record's
:class:`~contracts.returns.ReturnContract`. A return that no declared contract can judge
ends ``RETURNED_UNVERIFIED``: kept, never admitted.

Transitions live in one table. :func:`transition` refuses anything the table does not
allow, refuses to leave a terminal state, checks the version the caller expects, and
appends an event with a timestamp and a reason.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import ConfigDict, Field

from contracts.model import Model
from contracts.returns import ReturnContract


class HandoffState(StrEnum):
    PROPOSED = "PROPOSED"
    ADMITTED = "ADMITTED"
    DISPATCHED = "DISPATCHED"
    RUNNING = "RUNNING"
    RETURNED = "RETURNED"
    # Returned, kept with its hash and size, but not admitted: no contract could judge it.
    RETURNED_UNVERIFIED = "RETURNED_UNVERIFIED"
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"
    FAILED = "FAILED"
    QUARANTINED = "QUARANTINED"


S = HandoffState
TERMINAL_STATES = frozenset(
    {S.ACCEPTED, S.RETURNED_UNVERIFIED, S.REJECTED, S.CANCELLED, S.TIMED_OUT, S.FAILED}
)
_ENDINGS = {S.CANCELLED, S.TIMED_OUT, S.FAILED}

TRANSITIONS: dict[HandoffState, frozenset[HandoffState]] = {
    S.PROPOSED: frozenset({S.ADMITTED, S.REJECTED, S.CANCELLED}),
    S.ADMITTED: frozenset({S.DISPATCHED} | _ENDINGS),
    S.DISPATCHED: frozenset({S.RUNNING, S.RETURNED, S.QUARANTINED} | _ENDINGS),
    # RUNNING -> RUNNING records a change of attention reason (input or auth required).
    S.RUNNING: frozenset({S.RUNNING, S.RETURNED, S.QUARANTINED} | _ENDINGS),
    S.QUARANTINED: frozenset({S.RUNNING, S.RETURNED, S.QUARANTINED} | _ENDINGS),
    S.RETURNED: frozenset(
        {S.ACCEPTED, S.RETURNED_UNVERIFIED, S.REJECTED, S.CANCELLED, S.TIMED_OUT}
    ),
    **{state: frozenset() for state in TERMINAL_STATES},
}


class TransitionError(Exception):
    """A transition the table does not allow, or one based on a stale version."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Record(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HandoffEvent(_Record):
    state: HandoffState
    at: datetime
    reason: str


class TimeoutDisposition(StrEnum):
    """What the source does when a handoff's lease runs out."""

    CONTINUE_WITHOUT_EVIDENCE = "continue_without_evidence"
    FAIL_RUN = "fail_run"


class StateRef(_Record):
    """The authoritative run state a handoff was cut from, and its version."""

    id: str
    version: int


class HandoffBudget(_Record):
    """A handoff's envelope; the model figures are absent when the run names no such limit."""

    actions: int
    context_units: int
    effects: int
    model_requests: int | None = None
    model_tokens: int | None = None


class ModelUsage(_Record):
    """The model requests (and tokens, ``None`` when unknown) a remote reported for a handoff."""

    requests: int
    total_tokens: int | None = None


class HandoffRecord(_Record):
    """The handoff contract and where it stands.

    Optional contract fields may be absent on a proposal; admission refuses to dispatch
    one that lacks what it needs (final owner, timeout disposition, cancellation reference,
    a bounded budget and lease) rather than filling them in.
    """

    handoff_id: str
    run_id: str
    source: str
    target: str
    skill: str
    final_owner: str
    task_slice: str = ""
    owner_during_slice: str | None = None
    state_ref: StateRef | None = None
    capabilities: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    tenant: str | None = None
    resource: str | None = None
    delegation_expires_at: datetime | None = None
    budget: HandoffBudget | None = None
    complete_when: str | None = None
    return_when: str | None = None
    cancel_ref: str | None = None
    lease_expires_at: datetime | None = None
    on_timeout: TimeoutDisposition | None = None
    duplicate_key: str | None = None
    attempt: int = 1
    # What the return must be to be admitted; the default admits nothing (held for review).
    return_contract: ReturnContract = Field(default_factory=ReturnContract)
    state: HandoffState = S.PROPOSED
    version: int = 0
    reason: str = "proposed"
    remote_task_id: str | None = None
    remote_state: str | None = None
    # What the remote reported spending on models for this attempt (untrusted, only counted).
    remote_model_usage: ModelUsage | None = None
    events: tuple[HandoffEvent, ...] = Field(default_factory=tuple)

    @property
    def attempt_id(self) -> str:
        """One attempt of a logical handoff: a retry keeps the id and bumps the attempt."""
        return f"{self.handoff_id}/{self.attempt}"

    @property
    def live(self) -> bool:
        return self.state in (S.ADMITTED, S.DISPATCHED, S.RUNNING, S.QUARANTINED)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


def can_transition(current: HandoffState, to: HandoffState) -> bool:
    return to in TRANSITIONS[current]


def transition(
    record: HandoffRecord,
    to: HandoffState,
    reason: str,
    *,
    expected_version: int | None = None,
    at: datetime | None = None,
    **changes: object,
) -> HandoffRecord:
    """Return ``record`` moved to ``to``, or raise :class:`TransitionError`."""
    if expected_version is not None and expected_version != record.version:
        raise TransitionError(
            "stale_version",
            f"handoff {record.handoff_id} is at version {record.version}, not {expected_version}",
        )
    if record.terminal:
        raise TransitionError(
            "terminal", f"handoff {record.handoff_id} is already {record.state.value}"
        )
    if not can_transition(record.state, to):
        raise TransitionError(
            "not_allowed", f"handoff cannot go from {record.state.value} to {to.value}"
        )
    event = HandoffEvent(state=to, at=at or datetime.now(UTC), reason=reason)
    return record.model_copy(
        update={
            "state": to,
            "reason": reason,
            "version": record.version + 1,
            "events": (*record.events, event),
            **changes,
        }
    )
