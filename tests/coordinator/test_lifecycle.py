"""The handoff book decides races by authoritative revision, in either order of arrival."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from contracts.handoff import HandoffBudget, HandoffRecord, HandoffState
from coordinator.handoff.admission import AdmissionDenied, ParentAuthority
from coordinator.handoff.book import HandoffBook, RunCancelled, StaleRevision, UnitKind
from coordinator.handoff.verdicts import ArtifactDecision
from tests.coordinator.test_admission import CTX, NOW, proposal

S = HandoffState


class FrozenClock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def book(clock: FrozenClock) -> HandoffBook:
    parent = ParentAuthority(
        scope=frozenset({"risk:interpret"}),
        tenant="pilot",
        resources=frozenset({"pilot-records"}),
        expires_at=NOW + timedelta(minutes=10),
        remaining=HandoffBudget(actions=4, context_units=10_000, effects=0),
        max_context_units=5_000,
    )
    return HandoffBook(run_id="run-1", parent=parent, clock=clock, state_version=3)


def dispatched(book: HandoffBook, **changes: object) -> HandoffRecord:
    record = book.admit(proposal(**changes), CTX)
    record = book.commit(record, S.DISPATCHED, "message_sending")
    return book.note(record, remote_task_id="task-1")


def returned_and_judged(book: HandoffBook, record: HandoffRecord) -> ArtifactDecision:
    """What the dispatch loop does when the remote says COMPLETED."""
    try:
        returned = book.commit(record, S.RETURNED, "remote_completed")
    except StaleRevision:
        return book.receive(record, admitted=True, reason="ok", content_hash="h", size=1)
    return book.receive(
        returned, admitted=True, reason="ok", content_hash="h", size=1, move=_moved_by
    )


def _moved_by(decision: ArtifactDecision, reason: str) -> tuple[HandoffState, str]:
    return (S.ACCEPTED if decision is ArtifactDecision.ADMITTED else S.REJECTED), decision.value


def test_result_before_cancel_is_admitted(book: HandoffBook) -> None:
    """A result committed before the cancel is admitted, and the cancel finds nothing live."""
    record = dispatched(book)
    assert returned_and_judged(book, record) is ArtifactDecision.ADMITTED
    assert book.cancel() == []
    assert book.current(record).state is S.ACCEPTED


def test_cancel_before_result_makes_the_result_late(book: HandoffBook) -> None:
    """A result arriving after the cancel committed is late_after_cancel and kept, not admitted."""
    record = dispatched(book)
    cancelled = book.cancel()
    assert [c.state for c in cancelled] == [S.CANCELLED]
    assert returned_and_judged(book, record) is ArtifactDecision.LATE_AFTER_CANCEL
    assert book.current(record).state is S.CANCELLED
    assert book.artifacts[-1].decision is ArtifactDecision.LATE_AFTER_CANCEL


def test_cancelled_run_dispatches_nothing_new(book: HandoffBook) -> None:
    """After the run is cancelled, admission refuses and records the refusal."""
    book.cancel()
    with pytest.raises(RunCancelled):
        book.admit(proposal(), CTX)
    assert book.units[-1].kind is UnitKind.REJECTED


def test_renewal_before_expiry_keeps_the_lease(book: HandoffBook, clock: FrozenClock) -> None:
    """A lease renewed before it ends does not expire at its old time."""
    record = dispatched(book)
    clock.advance(30)
    book.renew(record, seconds=120)
    clock.advance(60)
    assert book.expire_leases() == []


def test_renewal_after_expiry_is_refused(book: HandoffBook, clock: FrozenClock) -> None:
    """Once the lease ended and the handoff timed out, renewing it is refused."""
    record = dispatched(book)
    clock.advance(61)
    assert [r.state for r in book.expire_leases()] == [S.TIMED_OUT]
    with pytest.raises(StaleRevision) as caught:
        book.renew(record, seconds=120)
    assert caught.value.reason == "lease_expired"


def test_first_attempt_completing_after_its_replacement_is_late(
    book: HandoffBook, clock: FrozenClock
) -> None:
    """Attempt 1 times out, attempt 2 takes the key; attempt 1's result is late_after_lease."""
    first = dispatched(book)
    clock.advance(61)
    book.expire_leases()
    second = dispatched(
        book,
        attempt=2,
        lease_expires_at=clock.now + timedelta(minutes=1),
        delegation_expires_at=clock.now + timedelta(minutes=1),
    )
    assert returned_and_judged(book, first) is ArtifactDecision.LATE_AFTER_LEASE
    assert returned_and_judged(book, second) is ArtifactDecision.ADMITTED


def test_first_attempt_completing_before_a_replacement_blocks_it(book: HandoffBook) -> None:
    """Attempt 1 completes first; a replacement with the same key is denied as completed."""
    first = dispatched(book)
    assert returned_and_judged(book, first) is ArtifactDecision.ADMITTED
    with pytest.raises(AdmissionDenied) as caught:
        book.admit(proposal(attempt=2), CTX)
    assert caught.value.reason == "duplicate_completed"


def test_second_admission_while_active_is_duplicate_active(book: HandoffBook) -> None:
    """The same duplicate key cannot be admitted twice while one attempt is live."""
    dispatched(book)
    with pytest.raises(AdmissionDenied) as caught:
        book.admit(proposal(handoff_id="ho-2"), CTX)
    assert caught.value.reason == "duplicate_active"


def test_result_for_an_older_state_version_is_stale(book: HandoffBook) -> None:
    """A result cut from version 0 after the run moved to version 1 is stale, not aggregated."""
    record = dispatched(book)
    book.advance_state()
    assert returned_and_judged(book, record) is ArtifactDecision.STALE
    assert book.current(record).state is S.REJECTED


def test_budget_units_reserve_consume_and_release(book: HandoffBook, clock: FrozenClock) -> None:
    """Each attempt reserves its envelope; settling consumes what was sent and releases the rest."""
    first = dispatched(book, budget=HandoffBudget(actions=2, context_units=1_000, effects=0))
    clock.advance(61)
    book.expire_leases()
    kinds = [(u.kind, u.actions, u.context_units) for u in book.units]
    assert kinds == [
        (UnitKind.RESERVED, 2, 1_000),
        (UnitKind.CONSUMED, 1, 1_000),
        (UnitKind.RELEASED, 1, 0),
    ]
    assert book.remaining() == HandoffBudget(actions=3, context_units=9_000, effects=0)
    assert returned_and_judged(book, first) is ArtifactDecision.LATE_AFTER_LEASE
    assert book.remaining() == HandoffBudget(actions=3, context_units=9_000, effects=0)


def test_an_observation_that_changes_nothing_records_nothing(book: HandoffBook) -> None:
    """Seeing the remote in the state already noted keeps the record and adds no event."""
    record = book.note(dispatched(book), remote_state="TASK_STATE_WORKING")
    events = len(book.trail.kept)
    again = book.note(record, remote_state="TASK_STATE_WORKING")
    assert again is record
    assert len(book.trail.kept) == events
    moved = book.note(record, remote_state="TASK_STATE_COMPLETED")
    assert moved.remote_state == "TASK_STATE_COMPLETED" and len(book.trail.kept) == events + 1
