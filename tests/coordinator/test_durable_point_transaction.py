"""A durable point's transaction is begun and committed on the driver (issue 34, item 2).

The ledger's appends (every durable point of a handoff, grouped by the writer) run their
``BEGIN IMMEDIATE`` and ``COMMIT`` on the SQLite driver's own connection: through
SQLAlchemy each cost a statement's worth of its machinery. Counted: the statements
SQLAlchemy runs (none) and those SQLite runs (one ``BEGIN IMMEDIATE``, one ``COMMIT``).
What a transaction guarantees is checked on both backends: a step written with SQLAlchemy
Core joins the same transaction, and a step that raises leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, func, insert, select

from coordinator.audit.ledger import AuditEvent, Ledger
from coordinator.storage.datadir import DataDir
from coordinator.storage.schema import audit_events, health_probe
from coordinator.workspace import Workspace
from tests.coordinator.test_run_store_batching import admitted, new_run


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(DataDir(tmp_path))
    yield ws
    ws.close()


def fact(run_id: str = "run-a") -> AuditEvent:
    return AuditEvent(event_type="card.fetched", actor="coordinator", run_id=run_id)


def test_a_durable_point_runs_no_statement_through_sqlalchemy(workspace: Workspace) -> None:
    """The run's rows and events land in one transaction that SQLite sees begun
    ``IMMEDIATE`` and committed once, and SQLAlchemy neither begins nor runs anything."""
    engine = workspace.engine()
    through_sqlalchemy: list[str] = []
    begun = [0]
    by_sqlite: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        through_sqlalchemy.append(statement)

    def began(_connection: Any) -> None:
        begun[0] += 1

    def traced(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(by_sqlite.append)

    run = new_run(workspace)
    record = admitted(run)
    event.listen(engine, "connect", traced)
    engine.dispose()  # every connection from here on is traced
    event.listen(engine, "before_cursor_execute", seen)
    event.listen(engine, "begin", began)
    try:
        run.trail.flush()
    finally:
        event.remove(engine, "before_cursor_execute", seen)
        event.remove(engine, "begin", began)
    assert through_sqlalchemy == [] and begun[0] == 0
    assert [s for s in by_sqlite if s.startswith(("BEGIN", "COMMIT"))] == [
        "BEGIN IMMEDIATE",
        "COMMIT",
    ]
    assert workspace.run_store().in_flight() == [record.attempt_id]


def _probe_rows(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(health_probe)).scalar_one())


def _event_rows(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(audit_events)).scalar_one())


def _core_row(connection: Connection) -> None:
    connection.execute(insert(health_probe).values(id=1, probed_at="now", prober="test"))


def test_a_core_step_joins_the_transaction_and_commits_with_the_events(engine: Engine) -> None:
    ledger = Ledger(engine)
    assert ledger.append_many_with([fact(), fact()], _core_row) == 2
    assert _probe_rows(engine) == 1 and _event_rows(engine) == 2
    assert ledger.append_many_with([fact()], None) == 1  # and the next one begins afresh
    assert _event_rows(engine) == 3


@pytest.mark.parametrize("core", [False, True], ids=["driver-step", "core-step"])
def test_a_step_that_raises_leaves_nothing_behind(engine: Engine, core: bool) -> None:
    ledger = Ledger(engine)
    ledger.append(fact())

    def fails(connection: Connection) -> None:
        if core:
            _core_row(connection)
        raise RuntimeError("the step failed")

    with pytest.raises(RuntimeError, match="the step failed"):
        ledger.append_many_with([fact()], fails)
    assert _probe_rows(engine) == 0 and _event_rows(engine) == 1
    assert ledger.append_many_with([fact()], _core_row) == 1  # the connection is usable
    assert _probe_rows(engine) == 1 and _event_rows(engine) == 2
