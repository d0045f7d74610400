"""Budget units ride on the event that moved them, and the ledger keeps every one.

A governed handoff wrote three ``budget.units`` events of its own (reserved at admission,
consumed and released at its end), three of its fourteen: issue 34 asks for about four
events a handoff. The units now travel in the admission, the denial and the transition
that ended the handoff; a unit with no such event (a local role's model requests, a
refusal of a cancelled run) is still an event of its own. Reconstruction and the console
read both forms through one function, so a ledger written before reads as it did.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from contracts.handoff import HandoffBudget, HandoffState
from coordinator.audit.log.events import UNITS_EVENT, AuditEvent, StoredEvent
from coordinator.audit.reconstruction import reconstruct
from coordinator.console.timeline import detail
from coordinator.handoff.admission import AdmissionDenied, ParentAuthority
from coordinator.handoff.book import HandoffBook, RunCancelled
from coordinator.handoff.run import unit_row
from tests.coordinator.test_admission import CTX, NOW, proposal
from tests.coordinator.test_lifecycle import dispatched, returned_and_judged

S = HandoffState


@pytest.fixture
def book() -> HandoffBook:
    parent = ParentAuthority(
        scope=frozenset({"risk:interpret"}),
        tenant="pilot",
        resources=frozenset({"pilot-records"}),
        expires_at=NOW + timedelta(minutes=10),
        remaining=HandoffBudget(actions=4, context_units=10_000, effects=0),
        max_context_units=5_000,
    )
    return HandoffBook(run_id="run-1", parent=parent, clock=lambda: NOW, state_version=3)


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
    """The same facts in the form ledgers had before: each unit an event after its own."""
    before: list[StoredEvent] = []
    for event in events:
        units = event.data.get("units") or []
        data = {k: v for k, v in event.data.items() if k != "units"}
        before.append(_with(event, event.event_type, data))
        before += [_with(event, UNITS_EVENT, unit) for unit in units]
    return before


def _with(event: StoredEvent, event_type: str, data: dict[str, Any]) -> StoredEvent:
    fields = {**event.__dict__, "event_type": event_type, "data": data}
    return StoredEvent(**fields)


def types(book: HandoffBook) -> list[str]:
    return [event.event_type for event in book.trail.kept]


def test_a_handoff_books_its_units_in_its_admission_and_its_last_transition(
    book: HandoffBook,
) -> None:
    record = dispatched(book)
    returned_and_judged(book, record)
    assert UNITS_EVENT not in types(book)
    kept = book.trail.kept
    admitted = next(e for e in kept if e.event_type == "handoff.admitted")
    moves = [e for e in kept if e.event_type == "handoff.transition"]
    assert [unit["kind"] for unit in admitted.data["units"]] == ["reserved"]
    assert [e.data["to"] for e in moves] == ["DISPATCHED", "RETURNED", "ACCEPTED"]
    assert [unit["kind"] for unit in moves[-1].data["units"]] == ["consumed", "released"]
    assert all("units" not in event.data for event in moves[:-1])


def test_the_ledger_holds_every_unit_the_book_holds_in_the_same_order(book: HandoffBook) -> None:
    """Reconstruction from the ledger alone gives the book's units, field for field; the
    same facts in the older form (each unit an event) give the same view."""
    returned_and_judged(book, dispatched(book))
    with pytest.raises(AdmissionDenied):
        book.admit(proposal(attempt=2), CTX)  # its key completed: duplicate_completed
    book.spend("supervisor", 2, 40)
    book.cancel()
    with pytest.raises(RunCancelled):
        book.admit(proposal(handoff_id="ho-3"), CTX)
    assert types(book).count(UNITS_EVENT) == 2  # the local spend, the cancelled run's refusal
    events = stored(book.trail.kept)
    view = reconstruct(events)["budget"]
    kinds = ["reserved", "consumed", "released", "rejected", "spent", "rejected"]
    assert [r["kind"] for r in view] == kinds
    booked = [unit_row(unit) for unit in book.units]
    for row, unit in zip(view, booked, strict=True):
        assert {k: v for k, v in row.items() if k != "branch"} == {
            k: v for k, v in unit.items() if k != "branch"
        }
    assert reconstruct(as_before(events))["budget"] == view


def test_the_console_shows_units_in_either_form(book: HandoffBook) -> None:
    returned_and_judged(book, dispatched(book))
    events = stored(book.trail.kept)
    ended = next(e for e in events if e.data.get("to") == "ACCEPTED")
    shown = detail(ended)
    assert shown.startswith("DISPATCHED -> ") or shown.startswith("RETURNED -> ACCEPTED")
    assert "consumed: actions 1, context_units" in shown and "released: actions" in shown
    admitted = next(e for e in events if e.event_type == "handoff.admitted")
    assert "reserved: actions 1" in detail(admitted) and '"units"' not in detail(admitted)
    older = [e for e in as_before(events) if e.event_type == UNITS_EVENT]
    assert [detail(e).split(":")[0] for e in older] == ["reserved", "consumed", "released"]
    assert detail(older[0]).endswith("(admitted)")
