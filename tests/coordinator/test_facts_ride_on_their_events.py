"""A handoff's facts ride on the event that caused them, and the ledger keeps every one.

A governed handoff wrote fourteen ledger events; issue 34 asks for about four. Budget
units were three events of their own (reserved at admission, consumed and released at its
end): they now travel in the admission, the denial and the move that ended the handoff. A
move of the handoff caused by another event is recorded in that event: the move to
DISPATCHED in ``message.dispatched``, the move an artifact's verdict causes in the
``artifact.*`` event. What is shown of the token a message went out with, and the
admission of its handoff, ride on its ``message.dispatched``. What no event stands for
stays an event of its own (a local role's model requests, a refusal of a cancelled run; a
move with no cause; a grant or an admission no dispatch carried). Reconstruction, the
console and the command line's progress read both forms through one function each, so a
ledger written before reads as it did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.handoff import HandoffRecord, HandoffState, StateRef
from coordinator.audit.log.events import (
    TRANSITION_EVENT,
    UNITS_EVENT,
    AuditEvent,
    StoredEvent,
    admission_in,
    units_in,
)
from coordinator.audit.receipts import grant_recorded
from coordinator.audit.reconstruction import reconstruct
from coordinator.audit.trail import Cause, carried_by
from coordinator.cli.progress import steps_of, text_of
from coordinator.console.timeline import detail
from coordinator.handoff.admission import AdmissionDenied
from coordinator.handoff.book import HandoffBook, RunCancelled
from coordinator.handoff.run import Run, unit_row
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_admission import CTX, NOW, PARENT, proposal
from tests.coordinator.test_lifecycle import dispatched, returned_and_judged
from tests.coordinator.test_run_store_batching import admitted, new_run

S = HandoffState


@pytest.fixture
def book() -> HandoffBook:
    return HandoffBook(run_id="run-1", parent=PARENT, clock=lambda: NOW, state_version=3)


def stored(events: list[AuditEvent]) -> list[StoredEvent]:
    """The trail's events as a ledger would give them back (the chain's fields aside)."""
    return [
        StoredEvent(
            seq=seq,
            prev_hash="0" * 64,
            hash="0" * 64,
            event_type=event.event_type,
            recorded_at=NOW,
            actor=event.actor,
            data=dict(event.data),
            run_id=event.run_id,
            handoff_id=event.handoff_id,
            attempt=event.attempt,
        )
        for seq, event in enumerate(events, 1)
    ]


def as_before(events: list[StoredEvent]) -> list[StoredEvent]:
    """The same facts in the form ledgers had before: each move a ``handoff.transition``
    after the event that caused it, and each unit a ``budget.units`` event after that."""
    before: list[StoredEvent] = []
    for event in events:
        data = {k: v for k, v in event.data.items() if k not in ("transition", "units")}
        before.append(_with(event, event.event_type, data))
        if "transition" in event.data:
            before.append(_with(event, TRANSITION_EVENT, event.data["transition"]))
        before += [_with(event, UNITS_EVENT, unit) for unit in event.data.get("units") or []]
    return before


def _with(event: StoredEvent, event_type: str, data: dict[str, Any]) -> StoredEvent:
    fields = {**event.__dict__, "event_type": event_type, "data": data}
    return StoredEvent(**fields)


def types(book: HandoffBook) -> list[str]:
    return [event.event_type for event in book.trail.kept]


def judged(book: HandoffBook) -> None:
    """A handoff dispatched as the driver does it (the move in its dispatch), answered,
    its artifact admitted (the move in the verdict)."""
    record = book.admit(proposal(), CTX)
    sending = Cause("message.dispatched", {"endpoint": "http://127.0.0.1:1/a2a"})
    record = book.commit(record, S.DISPATCHED, "message_sending", cause=sending)
    returned_and_judged(book, book.note(record, remote_task_id="task-1"))


def test_a_handoff_records_each_fact_in_the_event_that_caused_it(book: HandoffBook) -> None:
    judged(book)
    assert types(book) == [
        "handoff.admitted",  # with the units reserved
        "message.dispatched",  # with the move to DISPATCHED
        "handoff.transition",  # to RETURNED: no event of its own caused it here
        "artifact.admitted",  # with the move to ACCEPTED and the units settled
    ]
    admitted, dispatched_, returned, verdict = book.trail.kept
    assert [unit["kind"] for unit in admitted.data["units"]] == ["reserved"]
    assert dispatched_.data["transition"] == {
        "from": "ADMITTED",
        "to": "DISPATCHED",
        "reason": "message_sending",
        "version": 2,
    }
    assert returned.data["to"] == "RETURNED" and "units" not in returned.data
    assert verdict.data["transition"]["to"] == "ACCEPTED"
    assert [unit["kind"] for unit in verdict.data["units"]] == ["consumed", "released"]


def test_a_verdict_whose_move_is_refused_is_recorded_alone(book: HandoffBook) -> None:
    """A result that lost the race to a cancel: its verdict is recorded, with no move."""
    record = dispatched(book)
    book.cancel()
    assert returned_and_judged(book, record).value == "late_after_cancel"
    late = book.trail.kept[-1]
    assert late.event_type == "artifact.late_after_cancel" and "transition" not in late.data


def test_the_ledger_holds_every_fact_the_book_holds_in_either_form(book: HandoffBook) -> None:
    """Reconstruction from the ledger alone gives the book's units field for field and
    each branch's state; the same facts in the older form give the same view."""
    judged(book)
    with pytest.raises(AdmissionDenied):
        book.admit(proposal(attempt=2), CTX)  # its key completed: duplicate_completed
    book.spend("supervisor", 2, 40)
    book.cancel()
    with pytest.raises(RunCancelled):
        book.admit(proposal(handoff_id="ho-3"), CTX)
    assert types(book).count(UNITS_EVENT) == 2  # the local spend, the cancelled run's refusal
    events = stored(book.trail.kept)
    view = reconstruct(events)
    kinds = ["reserved", "consumed", "released", "rejected", "spent", "rejected"]
    assert [row["kind"] for row in view["budget"]] == kinds
    booked = [unit_row(unit) for unit in book.units]
    for row, unit in zip(view["budget"], booked, strict=True):
        assert {k: v for k, v in row.items() if k != "branch"} == {
            k: v for k, v in unit.items() if k != "branch"
        }
    states = {branch["branch"]: branch["state"] for branch in view["branches"]}
    assert states == {"ho-1/1": "ACCEPTED", "ho-1/2": "REJECTED"}  # ho-3: never a branch
    assert [set(a) for a in view["artifacts"]] == [
        {"branch", "decision", "reason", "judged", "content_hash", "size", "contract"}
        | {"remote_task_id"}
    ]
    assert reconstruct(as_before(events)) == view | {"events": len(as_before(events))}


def test_the_console_and_the_progress_lines_show_what_an_event_carries(
    book: HandoffBook,
) -> None:
    judged(book)
    events = stored(book.trail.kept)
    verdict = next(e for e in events if e.event_type == "artifact.admitted")
    shown = detail(verdict)
    assert "RETURNED -> ACCEPTED (admitted)" in shown and "consumed: actions 1" in shown
    admitted = next(e for e in events if e.event_type == "handoff.admitted")
    assert "reserved: actions 1" in detail(admitted) and '"units"' not in detail(admitted)
    older = [e for e in as_before(events) if e.event_type == UNITS_EVENT]
    assert [detail(e).split(":")[0] for e in older] == ["reserved", "consumed", "released"]
    assert detail(older[0]).endswith("(admitted)")
    lines = [text_of(step) for event in book.trail.kept for step in steps_of(event)]
    assert lines == [
        "attempt 1 dispatched to http://127.0.0.1:1/a2a",
        "attempt 1: DISPATCHED -> RETURNED (remote_completed)",
        "attempt 1: RETURNED -> ACCEPTED (admitted)",
    ]


def test_an_observation_held_for_its_move_is_recorded_by_it(book: HandoffBook) -> None:
    """The remote's COMPLETED moves the handoff to RETURNED when the task settles, a step
    later: the observation is held until then and recorded with the move."""
    record = book.note(dispatched(book), remote_state="TASK_STATE_COMPLETED", hold=True)
    assert types(book)[-1] != "remote.state_observed"
    completed = book.held_for(record)
    book.commit(record, S.RETURNED, "remote_completed", cause=completed)
    observed = book.trail.kept[-1]
    assert observed.event_type == "remote.state_observed"
    assert observed.data["remote_state"] == "TASK_STATE_COMPLETED"
    assert observed.data["local_state"] == "DISPATCHED"
    assert observed.data["transition"]["to"] == "RETURNED"


def test_a_held_fact_no_move_takes_is_written_alone_with_the_next_flush(tmp_path: Path) -> None:
    """Nothing held waits past the trail's next write: a durable point records it."""
    workspace = Workspace(DataDir(tmp_path))
    try:
        run = new_run(workspace)
        record = run.book.commit(admitted(run), S.DISPATCHED, "message_sending")
        completed = {"remote_task_id": "task-1", "remote_state": "TASK_STATE_COMPLETED"}
        run.book.note(record, hold=True, **completed)
        run.trail.flush()
        written = workspace.ledger().events(run.run_id)
    finally:
        workspace.close()
    assert written[-1].event_type == "remote.state_observed"
    assert "transition" not in written[-1].data
    assert run.book.held_for(record) is None  # written once: nothing is held any more


GRANT = {"jti": "jti-1", "claims_digest": "sha-256:" + "ab" * 32, "aud": "urn:remote"}


def test_a_grant_rides_on_its_dispatch_or_is_written_alone(tmp_path: Path) -> None:
    """What is shown of an attempt's token is held for the dispatch that carries it
    (``grant`` in ``message.dispatched``: one event, as the ledger records a sent
    message); a grant no dispatch took (its attempt not sent) is written alone, as a
    ``grant.minted``, by the trail's next write. Either form is the same grant to every
    reader (``grant_recorded``)."""
    workspace = Workspace(DataDir(tmp_path))
    try:
        run = new_run(workspace)
        record = admitted(run)
        run.hold("grant.minted", record, {"grant": GRANT}, **GRANT)
        carried = carried_by(run.trail.take_held(record))
        run.emit("message.dispatched", record, endpoint="http://127.0.0.1:1/a2a", **carried)
        again = {**GRANT, "jti": "jti-2"}  # minted again, not sent
        run.hold("grant.minted", record, {"grant": again}, **again)
        run.trail.flush()
        written = workspace.ledger().events(run.run_id)
    finally:
        workspace.close()
    grants = [(e.event_type, grant_recorded(e.event_type, e.data)) for e in written]
    assert [(kind, dict(grant)) for kind, grant in grants if grant is not None] == [
        ("message.dispatched", GRANT),
        ("grant.minted", {**GRANT, "jti": "jti-2"}),
    ]
    assert run.trail.take_held(record) == []  # taken by the write: never written twice
    view = reconstruct(written)
    assert [grant["jti"] for grant in view["grants"]] == ["jti-1", "jti-2"]
    dispatch = next(e for e in written if e.event_type == "message.dispatched")
    assert "jti jti-1" in detail(dispatch)


def held_admission(run: Run) -> HandoffRecord:
    """A handoff admitted as the driver admits one: held for its dispatch."""
    ref = StateRef(id=run.run_id, version=run.book.state_version)
    offer = proposal(run_id=run.run_id, state_ref=ref, handoff_id="ho-1")
    return run.book.admit(offer, CTX, hold=True)


def test_an_admission_rides_on_its_dispatch_or_comes_first_alone(tmp_path: Path) -> None:
    """The driver holds a handoff's admission (its contract and reserved units) for the
    dispatch, which records it (``admission`` and ``units``); an attempt that is never
    sent records it alone, before any other fact of that attempt, so a reader rebuilds
    the same branch from either ledger."""
    workspace = Workspace(DataDir(tmp_path))
    try:
        sent, failed = new_run(workspace), new_run(workspace)
        record = held_admission(sent)
        carried = carried_by(sent.trail.take_held(record))
        sending = Cause("message.dispatched", {"endpoint": "http://127.0.0.1:1/a2a", **carried})
        sent.book.commit(record, S.DISPATCHED, "message_sending", cause=sending)
        sent.trail.flush()
        unsent = held_admission(failed)
        failed.book.commit(unsent, S.FAILED, "authority")  # minting refused: nothing sent
        failed.trail.flush()
        ledger = workspace.ledger()
        sent_events, failed_events = ledger.events(sent.run_id), ledger.events(failed.run_id)
    finally:
        workspace.close()
    assert [e.event_type for e in sent_events] == ["run.started", "message.dispatched"]
    dispatch = sent_events[-1]
    assert admission_in(dispatch.event_type, dispatch.data)["state"] == "ADMITTED"
    assert [unit["kind"] for unit in units_in(dispatch.event_type, dispatch.data)] == ["reserved"]
    (branch,) = reconstruct(sent_events)["branches"]
    assert (branch["state"], branch["target"]) == ("DISPATCHED", "remote-risk")
    assert [e.event_type for e in failed_events] == [
        "run.started",
        "handoff.admitted",
        TRANSITION_EVENT,
    ]
    (branch,) = reconstruct(failed_events)["branches"]
    assert branch["state"] == "FAILED"


def test_what_the_trail_holds_keeps_its_attempts_order(book: HandoffBook) -> None:
    """One home for held facts (the trail): a move takes the fact held as its cause and
    writes any other held fact alone before it; any other event of the attempt writes
    what is held first; a flush writes what is left."""
    record = dispatched(book)
    held = {"run_id": "run-1", "record": record, "trace_id": None}
    book.trail.hold("grant.minted", **held, data=GRANT, carried={"grant": GRANT})
    record = book.note(record, remote_state="TASK_STATE_COMPLETED", hold=True)
    cause = book.held_for(record)
    assert cause is not None and types(book)[-1] == "grant.minted"  # alone, first
    book.commit(record, S.RETURNED, "remote_completed", cause=cause)
    assert types(book)[-1] == "remote.state_observed"
    book.trail.hold("grant.minted", **held, data=GRANT, carried={"grant": GRANT})
    book.note(book.current(record), lease_expires_at=NOW)  # another event of the attempt
    assert types(book)[-2:] == ["grant.minted", "lease.renewed"]
    book.trail.hold("grant.minted", **held, data=GRANT, carried={"grant": GRANT})
    book.trail.flush()
    assert types(book)[-1] == "grant.minted" and book.trail.take_held(record) == []
