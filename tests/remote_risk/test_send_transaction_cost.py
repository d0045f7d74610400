"""What the one transaction of a blocking SendMessage costs on SQLite, counted: it joins
the write transaction its turn of the event loop shares (every store, guard and log it
touches joins that rather than entering a transaction of its own), the statements it
runs in its savepoint, and one commit. Counts, never times: a regression shows as a
number that grew."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from member_kit.storage import engine as storage_engine
from member_kit.tasks.record import TaskRecord
from tests.remote_risk.delegated import Caller, delegated_service
from tests.remote_risk.test_fast_send_path import _traced, _transactions, _writes

# idempotency key lookup, the task counted in (the store's counter, not a count of its
# table), the jti claim, the grant watched, the log's last seq and its one insert, the
# sequence bump, the task's one insert (holding its key: on SQLite no row of the key's own)
STATEMENTS_PER_SEND = 8


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Caller, Any]]:
    with delegated_service(data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, caches, first entries
        app.state.audit_log.flush()
        yield caller, app


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The begin statement of every driver transaction entered from now on (joined
    ones included, if they enter one)."""
    entered: list[str] = []
    real: Callable[..., Any] = storage_engine._driver_transaction

    def counted(engine: Any, begin: str, **options: Any) -> Any:
        entered.append(begin)
        return real(engine, begin, **options)

    monkeypatch.setattr(storage_engine, "_driver_transaction", counted)
    return entered


def _turns(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every shared transaction of a loop turn opened from now on."""
    opened: list[Any] = []

    class Counted(storage_engine._Turn):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            opened.append(self)

    monkeypatch.setattr(storage_engine, "_Turn", Counted)
    return opened


def test_a_blocking_send_enters_one_driver_transaction(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task, the key, the claim, the watched grant, the outcome and the receipt's log
    entry join the send's transaction, the one its turn of the loop shares: one opened,
    where each of them used to enter its own (joined) one."""
    caller, app = service
    entered, turns = _opened(monkeypatch), _turns(monkeypatch)
    task = caller.task_of(caller.send("run-1", "h-1"))
    app.state.audit_log.flush()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (entered, len(turns)) == ([], 1)


def test_a_blocking_send_runs_its_statements_in_one_commit(service: tuple[Caller, Any]) -> None:
    """Eight statements, six of them writes, and one commit: nothing is read back that
    the transaction wrote, and nothing is written twice. A send alone in its turn takes
    no savepoint (undoing it is undoing the transaction)."""
    caller, app = service
    statements = _traced(app.state.durable_store.engine)
    caller.task_of(caller.send("run-1", "h-1"))
    app.state.audit_log.flush()
    (only,) = _transactions(statements)
    assert len(only) == STATEMENTS_PER_SEND
    assert sum(_writes(statement) for statement in only) == 6
    assert sum(statement == "COMMIT" for _, statement in statements) == 1


def test_a_blocking_send_snapshots_its_task_once(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is the one snapshot taken: the task as it passed through WORKING is
    built as an update only when a stream or a webhook hears it (none here)."""
    caller, _ = service
    taken: list[str] = []
    real = TaskRecord.snapshot

    def counted(record: TaskRecord, *args: Any, **kwargs: Any) -> Any:
        snapshot = real(record, *args, **kwargs)
        taken.append(snapshot.status.state.value)
        return snapshot

    monkeypatch.setattr(TaskRecord, "snapshot", counted)
    caller.task_of(caller.send("run-1", "h-1"))
    assert taken == ["TASK_STATE_COMPLETED"]
