"""A run's store rows wait for its audit trail's flush and land in the same transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

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


def admitted(run: Run, handoff_id: str = "ho-1") -> HandoffRecord:
    ref = StateRef(id=run.run_id, version=run.book.state_version)
    offer = proposal(run_id=run.run_id, state_ref=ref, handoff_id=handoff_id)
    return run.book.admit(offer, CTX)


def count_commits(ws: Workspace) -> list[int]:
    """Every COMMIT SQLite runs from here on (a durable point commits on the driver, so
    SQLAlchemy's own commit event does not see it)."""
    commits = [0]

    def committed(statement: str) -> None:
        commits[0] += statement == "COMMIT"

    def traced(dbapi_connection: Any, _record: object) -> None:
        dbapi_connection.set_trace_callback(committed)

    event.listen(ws.engine(), "connect", traced)
    ws.engine().dispose()  # every connection from here on is traced
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


def ledger_states(ws: Workspace, run_id: str) -> dict[str, str]:
    """Each handoff's state as the ledger alone tells it (``audit show``)."""
    from coordinator.audit.reconstruction import reconstruct

    view = reconstruct(ws.ledger().events(run_id))
    return {b["branch"].split("/")[0]: b["state"] for b in view["branches"]}


def stored_states(ws: Workspace, run_id: str) -> dict[str, str]:
    return {r.handoff_id: r.state.value for r in ws.run_store().run_records(run_id)}


def test_a_read_never_lands_a_runs_rows_without_its_events(workspace: Workspace) -> None:
    """A read through the run's store writes what is pending: the rows with the ledger
    events they derive from, never the rows alone (a process stopped right after would
    leave a handoff the run store calls ACCEPTED and the ledger DISPATCHED)."""
    from contracts.handoff import HandoffState

    run = new_run(workspace)
    record = admitted(run)
    run.trail.flush()
    run.book.commit(record, HandoffState.DISPATCHED, "message_sending")
    run.keep_state()
    assert run.store is not None
    run.store.run_records(run.run_id)  # a read, as a driver's check of the stored row does
    assert stored_states(workspace, run.run_id) == {record.handoff_id: "DISPATCHED"}
    assert ledger_states(workspace, run.run_id) == stored_states(workspace, run.run_id)


def test_two_runs_on_one_store_each_land_with_their_own_events(workspace: Workspace) -> None:
    """The worker once gave every run it drove one store: a flush of one run's trail
    wrote another run's rows without that run's events. A store follows one trail at a
    time; when a second run takes it, the first run's rows land with the first's events."""
    from contracts.handoff import HandoffState

    shared = workspace.run_store()
    authority = RunAuthority(
        principal="operator", tenant="pilot", scopes=frozenset({"risk:interpret"})
    )
    first = Run(owner="operator", authority=authority, trail=workspace.trail(), store=shared)
    one = admitted(first)
    first.trail.flush()
    first.book.commit(one, HandoffState.DISPATCHED, "message_sending")
    second = Run(owner="operator", authority=authority, trail=workspace.trail(), store=shared)
    admitted(second, "ho-2")
    second.trail.flush()
    for run in (first, second):
        assert ledger_states(workspace, run.run_id) == stored_states(workspace, run.run_id)


def test_a_drives_renewal_covers_the_later_attempts_of_its_handoff(workspace: Workspace) -> None:
    """A worker renews the lease of the attempt it claimed; the retries it drives in the
    same drive are rows of their own. Renewing only the first let a retry's lease run out
    during a long retry and a second driver claim it: two drivers, one handoff."""
    import time

    from contracts.handoff import HandoffState
    from coordinator.storage.schema import handoffs

    store = workspace.run_store()
    first = proposal(run_id="run-1", attempt=1).model_copy(
        update={"state": HandoffState.FAILED, "version": 5}
    )
    retry = proposal(run_id="run-1", attempt=2).model_copy(update={"version": 1})
    store.save_handoff(first, driver="worker-a", lease_seconds=0.0)
    store.save_handoff(retry, driver="worker-a", lease_seconds=0.0)
    assert store.renew("worker-a", first.attempt_id, 60.0)
    with workspace.engine().connect() as connection:
        until = connection.execute(
            select(handoffs.c.driver_until).where(handoffs.c.attempt_id == retry.attempt_id)
        ).scalar_one()
    assert until > time.time() + 50  # the retry's lease, not only the first attempt's
    assert store.claim("worker-b", 60.0) == []

    store.save_handoff(retry.model_copy(update={"version": 2}), "worker-b", 60.0)
    assert not store.renew("worker-a", first.attempt_id, 60.0)  # taken: stop driving
