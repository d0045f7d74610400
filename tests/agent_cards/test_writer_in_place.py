"""The writer commits a turn's items on the loop's own thread only when nothing waits.

In place when the writer is idle and the batch can begin at once; on the writer's thread
when a job is queued or running there (the order of writes stays one order) or when the
batch would have to wait (:class:`~agent_cards.storage.writer.WouldWait`), and on SQLite
that is a write lock another connection holds.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from agent_cards.storage.engine import (
    BUSY_TIMEOUT_SECONDS,
    WAL_AUTOCHECKPOINT_PAGES,
    Database,
    driver_write_transaction,
)
from agent_cards.storage.in_place import InPlace, WouldWait, sqlite_in_place, without_waiting
from agent_cards.storage.writer import Writer

IDLE = InPlace(nullcontext)


def _recording(where: list[tuple[str, Any]]) -> Any:
    def commit(items: Sequence[Any]) -> list[Any]:
        where.extend((threading.current_thread().name, item) for item in items)
        return [ValueError(item) if item == "bad" else item.upper() for item in items]

    return commit


def _committed(writer: Writer, commit: Any, items: Sequence[Any]) -> list[Any]:
    """Each of ``items`` awaited for ``commit`` in one turn of a loop; their outcomes (a
    value or an exception each); the writer closed after."""

    async def main() -> list[Any]:
        awaited = [writer.commit(commit, item) for item in items]
        return list(await asyncio.gather(*awaited, return_exceptions=True))

    try:
        return asyncio.run(main())
    finally:
        writer.close()


def test_a_turns_items_are_committed_on_the_loops_thread_when_the_writer_is_idle() -> None:
    writer = Writer(in_place=IDLE)
    where: list[tuple[str, Any]] = []
    outcomes = _committed(writer, _recording(where), ("a", "bad", "c"))
    assert outcomes[0] == "A" and outcomes[2] == "C" and isinstance(outcomes[1], ValueError)
    assert where == [(threading.current_thread().name, item) for item in ("a", "bad", "c")]
    assert writer.batches_in_place == 1 and writer.batch_sizes[3] == 1
    assert writer._thread is None  # no thread was started for it


def test_a_batch_that_would_wait_goes_to_the_writers_thread() -> None:
    writer = Writer(in_place=IDLE)
    where: list[tuple[str, Any]] = []
    tries: list[str] = []

    def commit(items: Sequence[Any]) -> list[Any]:
        if threading.current_thread() is threading.main_thread():
            tries.append("in place")
            raise WouldWait("database is locked")
        return _recording(where)(items)

    async def main() -> Any:
        return await writer.commit(commit, "a")

    try:
        assert asyncio.run(main()) == "A"
    finally:
        writer.close()
    assert tries == ["in place"] and where == [(writer.name, "a")]
    assert writer.would_have_waited == 1 and writer.batches_in_place == 0


def test_items_queue_behind_a_job_the_writers_thread_is_running() -> None:
    writer = Writer(in_place=IDLE, max_wait=0.0)
    gate = threading.Event()
    order: list[str] = []
    where: list[tuple[str, Any]] = []
    commit = _recording(where)

    def job() -> None:
        gate.wait()
        order.append("job")

    async def main() -> Any:
        running = asyncio.ensure_future(writer.run(job))
        await asyncio.sleep(0.05)  # the thread is in the job
        item = asyncio.ensure_future(writer.commit(commit, "a"))
        await asyncio.sleep(0.05)  # the turn ended: the item could not go in place
        assert not item.done()
        gate.set()
        await running
        order.append("item " + await item)

    try:
        asyncio.run(main())
    finally:
        writer.close()
    assert order == ["job", "item A"]
    assert where == [(writer.name, "a")] and writer.batches_in_place == 0


def _engine(path: Path) -> Any:
    return Database("test.db", ()).open(f"sqlite:///{path}")


def _table(engine: Any) -> None:
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (x INTEGER)"))


def _rows(engine: Any) -> list[Any]:
    """What the table holds, read by a connection of its own; the engine then closed."""
    with engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT x FROM t").scalars().all()
    engine.dispose()
    return list(rows)


def test_on_sqlite_a_write_lock_held_elsewhere_makes_it_would_wait_at_once(
    tmp_path: Path,
) -> None:
    engine = _engine(tmp_path / "test.db")
    _table(engine)
    holder = sqlite3.connect(tmp_path / "test.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with (
            without_waiting(),
            pytest.raises(WouldWait),
            driver_write_transaction(engine) as connection,
        ):
            connection.exec_driver_sql("INSERT INTO t VALUES (1)")
        assert time.monotonic() - started < 1.0  # it did not wait out the busy timeout
    finally:
        holder.rollback()
        holder.close()
    with driver_write_transaction(engine) as connection:  # the same thread's connection
        timeout = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
        pages = connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        connection.exec_driver_sql("INSERT INTO t VALUES (2)")
    assert timeout == int(BUSY_TIMEOUT_SECONDS * 1000)  # its own rules, put back
    assert pages == WAL_AUTOCHECKPOINT_PAGES
    assert _rows(engine) == [2]


def test_on_sqlite_a_free_lock_is_taken_without_waiting_and_the_write_commits(
    tmp_path: Path,
) -> None:
    engine = _engine(tmp_path / "test.db")
    _table(engine)
    with without_waiting(), driver_write_transaction(engine) as connection:
        connection.exec_driver_sql("INSERT INTO t VALUES (1)")
    assert _rows(engine) == [1]


def test_a_lock_held_elsewhere_never_stalls_the_loop_and_the_items_land_after_it(
    tmp_path: Path,
) -> None:
    """Real SQLite, the writer idle: the turn's item is tried in place, would wait, and
    goes to the thread, which waits out the lock while a ticker on the loop runs on."""
    engine = _engine(tmp_path / "test.db")
    _table(engine)
    writer = Writer(in_place=sqlite_in_place(engine))
    threads: list[str] = []

    def insert(items: Sequence[int]) -> list[int]:
        with driver_write_transaction(engine) as connection:
            threads.append(threading.current_thread().name)
            for item in items:
                connection.exec_driver_sql("INSERT INTO t VALUES (?)", (item,))
        return list(items)

    holder = sqlite3.connect(tmp_path / "test.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    async def main() -> list[float]:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.ensure_future(ticker())
        item = asyncio.ensure_future(writer.commit(insert, 7))
        await asyncio.sleep(0.5)
        assert not item.done()  # waiting for the lock, on the thread
        holder.rollback()
        assert await item == 7
        ticking.cancel()
        return ticks

    try:
        ticks = asyncio.run(main())
    finally:
        writer.close()
        holder.close()
    assert max(later - earlier for earlier, later in itertools.pairwise(ticks)) < 0.25
    assert threads == [writer.name] and writer.would_have_waited == 1
    assert _rows(engine) == [7]


def test_every_so_many_batches_in_place_the_upkeep_runs_on_the_writers_thread() -> None:
    ran: list[str] = []
    writer = Writer(
        in_place=InPlace(nullcontext, lambda: ran.append(threading.current_thread().name), 3)
    )

    async def main() -> None:
        for item in range(7):
            await writer.commit(lambda items: list(items), item)
        await writer.run(lambda: None)  # after the upkeep queued before it

    try:
        asyncio.run(main())
    finally:
        writer.close()
    # (while an upkeep is queued or running, the items go to the thread, behind it)
    assert writer.batches_in_place >= 3 and sum(writer.batch_sizes.values()) == 7
    assert ran == [writer.name] * (writer.batches_in_place // 3)


def test_on_sqlite_commits_in_place_leave_the_wal_to_the_upkeep(tmp_path: Path) -> None:
    """No automatic checkpoint at an in-place commit, however long the WAL; the passive
    checkpoint of the upkeep copies it all."""
    engine = _engine(tmp_path / "test.db")
    _table(engine)
    for _ in range(WAL_AUTOCHECKPOINT_PAGES // 100 + 5):  # well past the threshold
        with without_waiting(), driver_write_transaction(engine) as connection:
            connection.exec_driver_sql("INSERT INTO t VALUES (?)", (b"x" * 400_000,))
    frames = (tmp_path / "test.db-wal").stat().st_size // 4096
    assert frames > WAL_AUTOCHECKPOINT_PAGES  # nothing was checkpointed at a commit
    sqlite_in_place(engine).upkeep()  # type: ignore[misc]
    with engine.connect() as connection:
        done = connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
    assert done[1] == done[2]  # every frame of the WAL is in the database
    engine.dispose()


def test_a_batch_in_place_that_waits_for_the_writer_runs_that_work_at_once() -> None:
    """A batch committed in place holds the writer: work it hands the writer and waits
    for (``call``, ``commit_now``) runs where it is, as on the writer's own thread,
    instead of waiting for a thread that waits for it."""
    writer = Writer(in_place=IDLE)
    inner: list[str] = []
    outcome: list[Any] = []

    def commit(items: Sequence[Any]) -> list[Any]:
        inner.append(writer.call(lambda: threading.current_thread().name))
        inner.append(writer.commit_now(lambda more: [m.upper() for m in more], "b"))
        return list(items)

    def drive() -> None:
        outcome.append(asyncio.run(writer.commit(commit, "a")))

    driving = threading.Thread(target=drive, name="loop", daemon=True)
    driving.start()
    driving.join(timeout=10)
    assert not driving.is_alive(), "the batch waited for the writer it holds"
    writer.close()  # (not while it is held: closing waits for the writer's thread)
    assert outcome == ["a"] and inner == ["loop", "B"] and writer.batches_in_place == 1


def test_an_item_the_batch_could_not_begin_alone_goes_to_the_thread_the_rest_lands() -> None:
    """A batch that fell back to its items one by one (one item failed the group) may
    find the lock taken for one of them: that item, not written, goes to the thread; the
    others keep their outcomes."""
    writer = Writer(in_place=IDLE)
    where: list[tuple[str, Any]] = []

    def commit(items: Sequence[Any]) -> list[Any]:
        if threading.current_thread() is threading.main_thread():
            where.extend(("in place", item) for item in items)
            return ["A", WouldWait("database is locked"), ValueError("c")]
        where.extend((threading.current_thread().name, item) for item in items)
        return [item.upper() for item in items]

    outcomes = _committed(writer, commit, ("a", "b", "c"))
    assert outcomes[:2] == ["A", "B"] and isinstance(outcomes[2], ValueError)
    assert where[3:] == [(writer.name, "b")]  # only the item that was not written
