"""What writing a run's and a handoff's row costs the database, counted (issue 34).

A durable point reads the stored row before it writes it (a cancel committed by another
process is kept, an ended handoff stays ended); when that read finds no row, the row is
inserted at once: no UPDATE that changes nothing runs first. Counted by SQLite itself
(its trace of every statement it runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from contracts import strict_json
from coordinator.storage.datadir import DataDir
from coordinator.storage.runs import RunStore
from coordinator.workspace import Workspace
from tests.coordinator.test_admission import proposal

DOCUMENT = {"run_id": "run-1", "cancelled": False}


@pytest.fixture
def traced_workspace(tmp_path: Path) -> Iterator[tuple[Workspace, list[str]]]:
    ws = Workspace(DataDir(tmp_path))
    engine = ws.engine()
    statements: list[str] = []

    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    event.listen(engine, "connect", trace)
    engine.dispose()  # every connection from here on is traced
    try:
        yield ws, statements
    finally:
        ws.close()


@pytest.fixture
def traced(traced_workspace: tuple[Workspace, list[str]]) -> tuple[RunStore, list[str]]:
    ws, statements = traced_workspace
    return ws.run_store(), statements


def _writes(statements: list[str]) -> list[str]:
    """``INSERT runs``, ``UPDATE handoffs``... for each write SQLite ran."""
    kept = [s.split() for s in statements if s.startswith(("INSERT", "UPDATE"))]
    return [f"{words[0]} {words[2] if words[0] == 'INSERT' else words[1]}" for words in kept]


def test_a_new_row_is_one_insert_and_a_stored_one_one_update(
    traced: tuple[RunStore, list[str]],
) -> None:
    store, statements = traced
    record = proposal(run_id="run-1")
    store.save_run("run-1", "operator", "pilot", {}, DOCUMENT)
    store.save_handoff(record)
    assert _writes(statements) == ["INSERT runs", "INSERT handoffs"]

    statements.clear()
    store.save_run("run-1", "operator", "pilot", {}, {**DOCUMENT, "step": 2})
    store.save_handoff(record.model_copy(update={"remote_task_id": "task-1"}))
    assert _writes(statements) == ["UPDATE runs", "UPDATE handoffs"]

    stored = store.handoff(record.attempt_id)
    assert stored is not None and stored[0].remote_task_id == "task-1"
    assert (store.run("run-1") or {})["document"] == {**DOCUMENT, "step": 2}


def test_a_runs_kind_and_authority_are_written_with_its_first_row_only(
    traced: tuple[RunStore, list[str]],
) -> None:
    """A run's kind and authority are fixed at its start: a later write of its row sets
    its owner (an ownership transfer changes it) and document, nothing else."""
    store, statements = traced
    authority = {"principal": "operator", "scope": ["risk:interpret"]}
    store.save_run("run-1", "operator", "pilot", authority, DOCUMENT)
    statements.clear()
    store.save_run("run-1", "auditor", "pilot", authority, {**DOCUMENT, "step": 2})
    updates = [s for s in statements if s.startswith("UPDATE runs")]
    assert len(updates) == 1
    assigned = updates[0].split(" SET ")[1].split(" WHERE ")[0]
    assert "authority" not in assigned and "kind" not in assigned and "owner" in assigned
    row = store.run("run-1") or {}
    assert (row["owner"], row["kind"], row["authority"]) == ("auditor", "pilot", authority)
    assert row["document"] == {**DOCUMENT, "step": 2}


def test_a_runs_own_document_is_not_parsed_again_but_a_cancel_from_elsewhere_is_kept(
    traced: tuple[RunStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write of a run's row reads the stored document for a cancellation another
    process committed; the text this store wrote itself is known not to hold one, so it
    is not parsed again (a run document is the largest thing a durable point reads)."""
    store, _ = traced
    parsed: list[str] = []
    loads = strict_json.loads

    def counted(text: str | bytes) -> Any:
        parsed.append(str(text))
        return loads(text)

    monkeypatch.setattr(strict_json, "loads", counted)
    store.save_run("run-1", "operator", "pilot", {}, DOCUMENT)
    store.save_run("run-1", "operator", "pilot", {}, {**DOCUMENT, "step": 2})
    store.save_run("run-1", "operator", "pilot", {}, {**DOCUMENT, "step": 3})
    assert parsed == []

    cancellation = {"by": "operator", "reason": "stop"}
    elsewhere = RunStore(store.engine)  # another process's store: a cancel
    cancelled = {**DOCUMENT, "step": 3, "cancelled": True, "cancellation": cancellation}
    elsewhere.save_run("run-1", "operator", "pilot", {}, cancelled)
    store.save_run("run-1", "operator", "pilot", {}, {**DOCUMENT, "step": 4})
    assert len(parsed) == 1  # the document written elsewhere
    kept = (store.run("run-1") or {})["document"]
    assert kept == {**DOCUMENT, "step": 4, "cancelled": True, "cancellation": cancellation}


def test_reading_whether_a_handoff_ended_is_one_statement_on_the_threads_connection(
    traced: tuple[RunStore, list[str]],
) -> None:
    """A driver asks once a handoff whether another process ended it, on the event
    loop's thread: one SELECT on the driver's cursor, on the thread's own connection
    (agent_cards.storage.held), opened once and kept: no connection is made per read
    (which cost more than the read)."""
    store, statements = traced
    record = proposal(run_id="run-1")
    store.save_handoff(record)
    connections: list[object] = []
    event.listen(store.engine, "engine_connect", connections.append)
    statements.clear()
    assert store.ended(record.attempt_id) is False
    assert store.ended("no-such-attempt") is False
    assert len(connections) <= 1  # the thread's own, if it had none yet
    kept = len(connections)
    assert store.ended(record.attempt_id) is False
    assert len(connections) == kept
    assert [s.split()[0] for s in statements] == ["SELECT", "SELECT", "SELECT"]


def test_a_payload_saved_with_its_pending_handoff_row_is_written_by_the_rows_insert(
    traced_workspace: tuple[Workspace, list[str]],
) -> None:
    """What a handoff will send is saved right after its admission, before the durable
    point that writes its row: the row's INSERT carries the payload and contract (no
    UPDATE of the row just inserted). Saved once the row is on disk, it is an UPDATE."""
    from tests.coordinator.test_run_store_batching import admitted, new_run

    ws, statements = traced_workspace
    store = ws.run_store()
    run = new_run(ws)
    assert run.store is not None
    record = admitted(run)
    run.store.save_payload(record, {"question": "?"}, "finding")
    statements.clear()
    run.trail.flush()
    assert [w for w in _writes(statements) if w.endswith("handoffs")] == ["INSERT handoffs"]
    stored = store.handoff(record.attempt_id)
    assert stored is not None and stored[1:] == ({"question": "?"}, "finding")

    statements.clear()
    run.store.save_payload(record, {"question": "again"}, "generic")
    run.trail.flush()
    assert [w for w in _writes(statements) if w.endswith("handoffs")] == ["UPDATE handoffs"]
    stored = store.handoff(record.attempt_id)
    assert stored is not None and stored[1:] == ({"question": "again"}, "generic")
