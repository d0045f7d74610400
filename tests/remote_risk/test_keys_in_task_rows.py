"""Idempotency keys in their task's row while it is stored (issue 34).

A blocking send under load was a fifth slower than it needed to be for its commit's
pages: every send opening a task wrote its key's own row, four B-trees on SQLite, though
the task's row already holds the key. The task's row now holds the key's expiry too, and
the key's own row is written when the task is evicted (with its final form), so a send
writes no row for its key on SQLite. What a key answers is unchanged (the same tests run
on every store in test_tasks.py); these check what is stored, the race the key's own row
guarded against on SQLite, and the migration. Real SQLite files and PostgreSQL schemas.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from contracts.wire import Message, Part, Role, TaskState
from member_kit import errors
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import current_revision, migrate
from member_kit.storage.schema import idempotency_keys, tasks
from member_kit.tasks.sql import SQLTaskStore

NOTE = Message(message_id="m-1", role=Role.USER, parts=[Part(text="first")])


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = open_engine(data_dir=tmp_path, member="remote_risk")
    migrate(engine)
    yield engine
    engine.dispose()


def key_rows(engine: Engine) -> list[tuple[Any, ...]]:
    c = idempotency_keys.c
    with engine.connect() as connection:
        rows = connection.execute(
            select(c.idempotency_key, c.task_id, c.expires_at_ms, c.retained_task)
        )
        return [tuple(row) for row in rows]


def task_key_expiry(engine: Engine, task_id: str) -> int | None:
    with engine.connect() as connection:
        query = select(tasks.c.key_expires_at_ms).where(tasks.c.id == task_id)
        return connection.execute(query).scalar_one()


def test_on_sqlite_a_task_s_row_holds_its_key_until_it_is_evicted(sqlite_engine: Engine) -> None:
    """No key row while the task is stored; its row says when the key expires; evicted,
    the key's row holds the task's final form, and the key still answers it."""
    clock = Clock()
    store = SQLTaskStore(sqlite_engine, 1, clock=clock, retention=timedelta(hours=1))
    first = store.create("alice", NOTE, idempotency_key="run-1:h1")
    expires = int((clock.now + timedelta(hours=1)).timestamp() * 1000)
    assert key_rows(sqlite_engine) == []
    assert task_key_expiry(sqlite_engine, first.id) == expires
    assert store.advance(first.id, TaskState.COMPLETED)
    store.create("alice", NOTE)  # the finished task makes room
    ((key, task_id, kept_until, retained),) = key_rows(sqlite_engine)
    assert (key, task_id, kept_until) == ("run-1:h1", first.id, expires)
    assert retained is not None and json.loads(retained)[0] == first.id
    found = store.find_by_idempotency_key("alice", "run-1:h1")
    assert found is not None and found.id == first.id and found.state is TaskState.COMPLETED


def test_a_key_held_by_its_task_is_refused_for_its_window_then_forgotten(
    sqlite_engine: Engine,
) -> None:
    """As a key's own row is: refused once expired, for a second window (then purged); a
    task still stored after that is what its key names, as when the key's row is gone."""
    clock = Clock()
    store = SQLTaskStore(sqlite_engine, 10, clock=clock, retention=timedelta(seconds=60))
    first = store.create("alice", NOTE, idempotency_key="k")
    clock.now += timedelta(seconds=59)
    assert store.create("alice", NOTE, idempotency_key="k").id == first.id
    for seconds in (60, 119):
        clock.now = Clock().now + timedelta(seconds=seconds)
        with pytest.raises(errors.IdempotencyKeyExpired):
            store.create("alice", NOTE, idempotency_key="k")
    clock.now = Clock().now + timedelta(seconds=120)
    assert store.create("alice", NOTE, idempotency_key="k").id == first.id
    assert len(store) == 1


def test_an_evicted_task_s_key_past_its_windows_is_forgotten_with_it(
    sqlite_engine: Engine,
) -> None:
    """A task evicted after its key's refusal window leaves no key row: the key is free."""
    clock = Clock()
    store = SQLTaskStore(sqlite_engine, 1, clock=clock, retention=timedelta(seconds=60))
    first = store.create("alice", NOTE, idempotency_key="k")
    assert store.advance(first.id, TaskState.COMPLETED)
    clock.now += timedelta(seconds=120)
    filler = store.create("alice", NOTE)  # evicts the first
    assert key_rows(sqlite_engine) == []
    assert store.advance(filler.id, TaskState.COMPLETED)
    assert store.create("alice", NOTE, idempotency_key="k").id not in (first.id, filler.id)


def test_on_sqlite_the_write_lock_leaves_no_race_between_a_key_s_lookup_and_its_task(
    sqlite_engine: Engine,
) -> None:
    """What the key's own row used to guard against on SQLite: a second process (a thread
    on its own connection) opening a task under the same key while the first one's
    transaction is open waits for that transaction, then is answered its task. One task,
    one claim."""
    first_store, second_store = SQLTaskStore(sqlite_engine, 10), SQLTaskStore(sqlite_engine, 10)
    claims: list[str] = []
    inside, go_on = threading.Event(), threading.Event()

    def first() -> str:
        with first_store.transaction():
            record = first_store.create(
                "alice", NOTE, idempotency_key="k", claim=lambda: claims.append("first")
            )
            inside.set()
            go_on.wait(10)
        return record.id

    def second() -> str:
        inside.wait(10)
        claim = lambda: claims.append("second")  # noqa: E731
        return second_store.create("alice", NOTE, idempotency_key="k", claim=claim).id

    with ThreadPoolExecutor(2) as pool:
        opened, answered = pool.submit(first), pool.submit(second)
        inside.wait(10)
        with pytest.raises(TimeoutError):
            answered.result(timeout=0.5)  # waiting for the first one's write lock
        go_on.set()
        assert answered.result(timeout=10) == opened.result(timeout=10)
    assert claims == ["first"] and len(first_store) == 1


def test_the_migration_gives_stored_tasks_their_key_s_expiry(database_url: str) -> None:
    """rr0010 on a database at rr0009: each stored task opened under a key takes the
    expiry of its key's row (which stays); a task without a key has none."""
    engine = open_engine(database_url)
    try:
        migrate(engine, "rr0009")
        with engine.begin() as connection:
            for task_id, key in (("t-1", "k-1"), ("t-2", None)):
                connection.exec_driver_sql(
                    "INSERT INTO remote_risk_tasks (id, owner, context_id, state, "
                    "changed_at_ms, sequence, history, artifacts, idempotency_key) "
                    f"VALUES ('{task_id}', 'alice', 'c', 'TASK_STATE_COMPLETED', 1, 1, "
                    f"'[]', '[]', {repr(key) if key else 'NULL'})"
                )
            connection.execute(
                idempotency_keys.insert().values(
                    owner="alice", idempotency_key="k-1", task_id="t-1", expires_at_ms=86_400_001
                )
            )
        migrate(engine, "rr0010")
        assert current_revision(engine) == "rr0010"
        assert task_key_expiry(engine, "t-1") == 86_400_001
        assert task_key_expiry(engine, "t-2") is None
        assert [row[:3] for row in key_rows(engine)] == [("k-1", "t-1", 86_400_001)]
    finally:
        engine.dispose()
