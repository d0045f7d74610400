"""A run's store rows wait for its audit trail's flush and land in the same transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from contracts.handoff import HandoffRecord, StateRef
from coordinator.authority.delegator import RunAuthority
from coordinator.handoff.run import Run
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_admission import CTX, NOW, proposal


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(DataDir(tmp_path))
    yield ws
    ws.close()


def new_run(ws: Workspace) -> Run:
    authority = RunAuthority(
        principal="operator", tenant="pilot", scopes=frozenset({"risk:interpret"})
    )
    return Run(
        owner="operator",
        authority=authority,
        trail=ws.trail(),
        store=ws.run_store(),
        started_at=NOW,
    )


def admitted(run: Run) -> HandoffRecord:
    ref = StateRef(id=run.run_id, version=run.book.state_version)
    return run.book.admit(proposal(run_id=run.run_id, state_ref=ref), CTX)


def count_commits(ws: Workspace) -> list[int]:
    commits = [0]

    def committed(_connection: object) -> None:
        commits[0] += 1

    event.listen(ws.engine(), "commit", committed)
    return commits


def test_rows_and_events_of_a_step_are_one_transaction(workspace: Workspace) -> None:
    """Starting a run and admitting a handoff writes nothing until the flush, which
    commits the run row, the handoff row, its budget units and the events at once."""
    commits = count_commits(workspace)
    run = new_run(workspace)
    record = admitted(run)
    outside = workspace.run_store()
    assert commits[0] == 0
    assert outside.run(run.run_id) is None and outside.in_flight() == []
    run.trail.flush()
    assert commits[0] == 1
    assert outside.in_flight() == [record.attempt_id]
    assert outside.run(run.run_id) is not None
    assert [row["kind"] for row in outside.rows("budget_units", run.run_id)] == ["reserved"]
    assert {e.event_type for e in workspace.ledger().events(run.run_id)} >= {
        "run.started",
        "handoff.admitted",
    }


def test_a_read_of_the_runs_own_store_sees_its_pending_rows(workspace: Workspace) -> None:
    """Reading through the run's store writes what is pending first: no stale answers."""
    run = new_run(workspace)
    record = admitted(run)
    assert run.store is not None
    assert run.store.in_flight() == [record.attempt_id]


def test_later_versions_of_a_pending_handoff_replace_the_earlier_one(
    workspace: Workspace,
) -> None:
    """Several changes to one handoff before a flush are written as its latest record."""
    from contracts.handoff import HandoffState

    run = new_run(workspace)
    record = admitted(run)
    record = run.book.commit(record, HandoffState.DISPATCHED, "message_sending")
    record = run.book.note(record, remote_task_id="task-1")
    run.trail.flush()
    stored = workspace.run_store().handoff(record.attempt_id)
    assert stored is not None
    assert stored[0].state is HandoffState.DISPATCHED and stored[0].remote_task_id == "task-1"


def test_a_deferred_store_refuses_pending_writes_from_another_thread(
    workspace: Workspace,
) -> None:
    """A run's store holds writes for its event loop's thread; flushing them from a worker
    thread (as a lease renewal would) is refused with a typed error instead of racing."""
    import threading

    from coordinator.errors import StorageError

    run = new_run(workspace)
    admitted(run)
    assert run.store is not None
    caught: list[BaseException] = []

    def renew_elsewhere() -> None:
        try:
            assert run.store is not None
            run.store.renew("someone", "nothing", 5.0)
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=renew_elsewhere)
    thread.start()
    thread.join()
    assert len(caught) == 1 and isinstance(caught[0], StorageError)
    assert caught[0].reason == "store_shared_across_threads"
    run.trail.flush()  # the owning thread still writes them
    assert workspace.run_store().in_flight()
