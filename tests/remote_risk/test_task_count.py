"""How many tasks the database store holds is a counter (member_kit.tasks.sql_counters):
each task about to be inserted counts itself in, each eviction counts out what it
deletes, no send counts the table, and the table is counted whenever the counter says the
store is full."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from agent_cards.storage.held import thread_connection
from contracts.wire import Message, Part, Role, TaskState
from member_kit import errors
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from member_kit.tasks.sql import SQLTaskStore

NOTE = Message(message_id="m-1", role=Role.USER, parts=[Part(text="a note")])


@pytest.fixture
def engine(migrated_engine: Engine) -> Engine:
    return migrated_engine


def _counter(engine: Engine) -> int:
    with engine.connect() as connection:
        sql = "SELECT value FROM remote_risk_counters WHERE name = 'task_count'"
        return int(connection.execute(text(sql)).scalar_one())


def _rows(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM remote_risk_tasks")).scalar_one())


def _set_counter(engine: Engine, value: int) -> None:
    with engine.begin() as connection:
        sql = "UPDATE remote_risk_counters SET value = :value WHERE name = 'task_count'"
        connection.execute(text(sql), {"value": value})


def _finished(store: SQLTaskStore, owner: str) -> str:
    record = store.create(owner, NOTE)
    store.advance(record.id, TaskState.COMPLETED)
    return record.id


def test_the_counter_follows_every_insert_and_eviction(engine: Engine) -> None:
    store = SQLTaskStore(engine, 4)
    for index in range(4):
        _finished(store, f"owner-{index}")
        assert _counter(engine) == _rows(engine) == index + 1
    with store.transaction():  # two opened in one transaction: inserted together
        store.create("late", NOTE)
    assert _counter(engine) == _rows(engine) == 4  # the fifth evicted the oldest first
    with store.transaction():
        store.create("later", NOTE)
        store.create("latest", NOTE)
    assert _counter(engine) == _rows(engine) <= 4


def test_a_send_into_a_store_with_room_does_not_count_the_table(tmp_path: Path) -> None:
    """Traced on SQLite's driver: the statements of the thread's own connection."""
    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}")
    migrate(engine)
    try:
        store = SQLTaskStore(engine, 1000)
        _finished(store, "warm")  # the thread's connection is open from here on
        statements: list[str] = []
        with thread_connection(engine) as connection:
            driver = connection.connection.driver_connection
        assert driver is not None
        driver.set_trace_callback(statements.append)
        try:
            with store.transaction():
                record = store.create("alice", NOTE)
                store.advance(record.id, TaskState.COMPLETED)
        finally:
            driver.set_trace_callback(None)
        assert statements, "the store's transaction ran on the thread's connection"
        assert not [s for s in statements if "count(*)" in s.lower()]
    finally:
        engine.dispose()


def test_a_counter_gone_wrong_evicts_nothing_and_is_put_right(engine: Engine) -> None:
    """Rows deleted by hand (or a race between replicas) leave the counter high: when it
    says the store is full, the table is counted, and nothing is evicted for nothing."""
    store = SQLTaskStore(engine, 3)
    kept = _finished(store, "alice")
    _set_counter(engine, 10)
    store.create("bob", NOTE)
    assert store.get("alice", kept).state is TaskState.COMPLETED
    assert _counter(engine) == _rows(engine) == 2


def test_a_store_that_is_full_still_evicts_down_to_its_low_water_mark(engine: Engine) -> None:
    store = SQLTaskStore(engine, 10)
    first = [_finished(store, f"owner-{index}") for index in range(10)]
    store.create("one more", NOTE)
    assert _rows(engine) == _counter(engine) == 10  # one evicted (a tenth of 10), one added
    with pytest.raises(errors.TaskNotFound):  # the oldest finished task went
        store.get("owner-0", first[0])


def test_the_migration_counts_the_tasks_already_stored(database_url: str) -> None:
    engine = open_engine(database_url)
    try:
        migrate(engine, "rr0008")
        with engine.begin() as connection:
            for index in range(3):
                connection.execute(
                    text(
                        "INSERT INTO remote_risk_tasks (id, owner, context_id, state,"
                        " changed_at_ms, sequence, history, artifacts) VALUES (:id, 'o', 'c',"
                        " 'TASK_STATE_COMPLETED', 0, :seq, '[]', '[]')"
                    ),
                    {"id": f"t-{index}", "seq": index + 1},
                )
        migrate(engine)
        assert _counter(engine) == 3
    finally:
        engine.dispose()
