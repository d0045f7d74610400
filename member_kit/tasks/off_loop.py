"""A task store's transaction run off the event loop (on PostgreSQL), on a few threads.

:meth:`member_kit.tasks.sql.SQLTaskStore.run_transaction` hands the work of a send (its
task, the token's claim, the outcome) or of a lease round to a small pool of threads per
process, so a slow or locked database holds that work only, never the event loop.
Records the work settles are not signalled from those threads (their ``settled`` event
belongs to the loop): they are collected and signalled on the loop once the work returns.

A pool and not the one writer the coordinator keeps (:mod:`agent_cards.storage.writer`):
remote_risk's transactions are independent of one another (no chain to extend in
order, nothing to group), so on PostgreSQL they run side by side on the engine's
connections and on SQLite one's Python work overlaps another's wait for the file lock.
Measured with ``python -m bench.db_paths`` (README, "Benchmarks"): at c=8 a pool
committed sends about 2.4x as fast as inline calls and about 3x as fast as one writer.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, TypeVar

from member_kit.storage.engine import in_turn
from member_kit.tasks.record import TaskRecord, signal_settled

T = TypeVar("T")
# Within SQLAlchemy's default pool (5 connections), so a thread never waits for one.
THREADS = 4
ON_SQLITE = """On SQLite the work stays on the event loop: the file belongs to this process,
and the service also writes its decision log from the loop; a second writer thread there
made the two queue on the file's lock, where a waiting connection sleeps in SQLite's busy
handler (up to 100 ms at a time; governed handoffs fell from ~75 to ~20 per s in some
windows). The works of one turn of the loop share one transaction and its commit
(:func:`~member_kit.storage.engine.in_turn`)."""
_POOLS: weakref.WeakKeyDictionary[Any, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_POOLS_LOCK = threading.Lock()

# Records settled by run_off_loop() work in the writer thread, signalled on the loop after.
_deferred: ContextVar[list[TaskRecord] | None] = ContextVar(
    "remote_risk_deferred_signals", default=None
)


async def run_off_loop(
    engine: Any, transaction: Callable[[], AbstractContextManager[None]], work: Callable[[], T]
) -> T:
    """``work()`` inside ``transaction()``, on one of ``engine``'s threads; its result."""
    settled: list[TaskRecord] = []
    token = _deferred.set(settled)  # the writer runs in a copy of this context

    def in_transaction() -> T:
        with transaction():
            return work()

    try:
        if engine.dialect.name == "sqlite":
            return await in_turn(engine, in_transaction)  # see ON_SQLITE
        context = contextvars.copy_context()  # trace parents, and the list above
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_pool_of(engine), context.run, in_transaction)
    finally:
        _deferred.reset(token)
        for record in settled:
            signal_settled(record)


def signal_or_defer(record: TaskRecord) -> None:
    """:func:`signal_settled` now, or on the loop after the work, inside it."""
    deferred = _deferred.get()
    if deferred is None:
        signal_settled(record)
    else:
        deferred.append(record)


def _pool_of(engine: Any) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(engine)
        if pool is None:
            pool = _POOLS[engine] = ThreadPoolExecutor(THREADS, thread_name_prefix="remote-risk-db")
        return pool
