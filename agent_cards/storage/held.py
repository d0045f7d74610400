"""A thread's own SQLite connection, kept from one of its transactions to the next.

The hot write paths of both services begin and commit their transactions on the
driver's connection: a member's send (:mod:`member_kit.storage.engine`), on its event
loop, and the coordinator's durable points, on its writer thread
(:func:`~agent_cards.storage.engine.driver_write_transaction`). Checked out of the pool
and back in around each transaction, that connection cost about 35 us a send in the
pool's bookkeeping and the reset it makes on return, and a pool of several connections
spread SQLite's cache of prepared statements, which each connection keeps for itself,
over all of them. Kept by the thread instead: remote_risk 1.31 against 1.36 ms of CPU a
send, the coordinator 2.53 against 2.64 ms a handoff (``bench.remote_cpu`` and
``bench.coordinator_cpu``, alternating rounds; docs/benchmarks.md).

So on SQLite :func:`thread_connection` gives the calling thread the connection its last
transaction used, and keeps it after this one. It is not kept when the transaction left
it invalid (a storage fault drops a connection, :func:`~agent_cards.storage.engine.undo`),
nor when SQLite opened it while the database was read-only (it goes back to the pool,
whose check replaces it, :mod:`agent_cards.storage.sqlite`); every kept connection is
closed when its engine is disposed. A thread only ever uses its own, so the connection
never serves two transactions at once. PostgreSQL connections go back to the pool after
each transaction, as before: a server's connections are the pool's to share and check.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, event

from agent_cards.storage.sqlite import opened_read_only

__all__ = ["thread_connection"]


@contextmanager
def thread_connection(engine: Engine) -> Iterator[Connection]:
    """A connection for one transaction of the calling thread: on SQLite the thread's own
    (see the module docstring), elsewhere one of the pool's."""
    if engine.dialect.name != "sqlite":
        with engine.connect() as connection:
            yield connection
        return
    held = _held(engine)
    taken = held.take()
    try:
        yield taken[1]
    finally:
        held.give_back(taken)


class _Held:
    """The connections an engine's threads keep, by thread. Disposing of the engine closes
    them; a connection taken before that is closed when it is given back."""

    def __init__(self, engine: Engine) -> None:
        self._engine = weakref.ref(engine)
        self._by_thread: dict[int, tuple[int, Connection]] = {}
        self._lock = threading.Lock()
        self._generation = 0

    def take(self) -> tuple[int, Connection]:
        with self._lock:
            kept = self._by_thread.pop(threading.get_ident(), None)
            generation = self._generation
        if kept is not None:
            return kept
        engine = self._engine()
        assert engine is not None  # its caller holds it
        return generation, engine.connect()

    def give_back(self, taken: tuple[int, Connection]) -> None:
        """Keep a connection for this thread's next transaction, or close it."""
        generation, connection = taken
        if _reusable(connection):
            with self._lock:
                if generation == self._generation:
                    kept = self._by_thread.setdefault(threading.get_ident(), taken)
                    if kept is taken:
                        return
        connection.close()

    def close_all(self) -> None:
        with self._lock:
            self._generation += 1
            kept, self._by_thread = list(self._by_thread.values()), {}
        for _, connection in kept:
            connection.invalidate()  # its SQLite handle closed now, whichever thread asks
            connection.close()


def _reusable(connection: Connection) -> bool:
    """Whether ``connection`` may serve another transaction: valid, outside any
    transaction, and not opened while the database was read-only."""
    if connection.closed or connection.invalidated or connection.in_transaction():
        return False
    pooled = connection.connection
    return pooled.is_valid and not opened_read_only(pooled)


_ENGINES: weakref.WeakKeyDictionary[Engine, _Held] = weakref.WeakKeyDictionary()
_ENGINES_LOCK = threading.Lock()


def _held(engine: Engine) -> _Held:
    with _ENGINES_LOCK:
        held = _ENGINES.get(engine)
        if held is None:
            held = _ENGINES[engine] = _Held(engine)
            event.listen(engine, "engine_disposed", lambda _engine: held.close_all())
        return held
