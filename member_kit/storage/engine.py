"""Open the kit's database: SQLite in the data directory by default, PostgreSQL by URL.

The mechanics (WAL, our own ``BEGIN``, write and read transactions) are
:mod:`agent_cards.storage.engine`, shared with the coordinator. Here the kit names each
member's file after it (:func:`database_file`: remote_risk's ``remote-risk.db``), keeps
statement and savepoint journals in memory (they only serve rolling back part of an open
transaction, never recovery after a crash, and as temporary files a savepoint around a
task's insert cost more than the commit it saves), and raises
:class:`~member_kit.errors.StorageUnavailable`.

The hot paths (a send's task and its token claim) run fixed SQL straight on the driver's
connection in :func:`driver_write`: building and compiling a Core statement per call cost
several times what SQLite takes to run it. Their SQL is written with ``:name``
placeholders and translated once per driver by :func:`driver_sql`.

**One commit a turn.** On SQLite the sends' transactions run on the event loop
(:mod:`member_kit.tasks.off_loop`); those of one turn of the loop share one
(:func:`in_turn`): each in a savepoint of its own, undone alone if it fails, and one
commit when the turn ends, before which none of them answers. A storage fault ends the
shared transaction and fails every send in it, as a failed commit does. Whatever else
uses the database from the loop's thread meanwhile (a read, the decision log's own
write) first has the turn commit, so it never waits for the turn's write lock and never
reads what is not committed; what a transaction holds for after its commit
(:func:`after_commit`) waits for the turn's.

A transaction holds at most :data:`MAX_SENDS_A_COMMIT` sends: the send that fills it
commits it there, and the turn's later sends share the next. A burst of sends is then
answered in groups as it is worked through, not all at once after its last send: a
coordinator waiting on those answers gets work back sooner (issue 34: governed handoffs
at 32 in flight, docs/benchmarks.md), for one more commit every eight sends.

**Answers before new work.** A turn's sends resume once its commit is made, each in the
loop's next turn, queued behind whatever the loop took in meanwhile: a request that
arrived then does its own work first (its token check, its transaction: about a
millisecond) and the answers wait for it. :func:`answers_pending` says when sends of a
committed turn have yet to resume, so that a new request can let them go first
(:mod:`member_kit.server.answers_first`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy.engine.interfaces import DBAPICursor

from agent_cards.storage.driver import styled
from agent_cards.storage.engine import (
    BUSY_TIMEOUT_SECONDS,
    Database,
    created,
    read_transaction,
    undo,
    write_transaction,
)
from agent_cards.storage.faults import is_storage_fault
from agent_cards.storage.held import thread_connection
from member_kit.errors import shared_translated

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "DATABASE",
    "DATABASE_FILE",
    "MAX_SENDS_A_COMMIT",
    "after_commit",
    "answers_pending",
    "commit_turn",
    "database_file",
    "database_url_for",
    "driver_errors",
    "driver_read",
    "driver_sql",
    "driver_write",
    "in_turn",
    "open_engine",
    "read_transaction",
    "transaction_notes",
    "write_transaction",
]

# remote_risk's file; before each member's was named after it, every member's
DATABASE_FILE = "remote-risk.db"
DATABASE = Database(DATABASE_FILE, ("PRAGMA temp_store=MEMORY",))
_SAVEPOINT = "remote_risk_step"
# The driver-level transaction open in this context (thread or asyncio task), by engine.
_open_write: ContextVar[_Joined | None] = ContextVar("remote_risk_open_write", default=None)
T = TypeVar("T")


def database_file(member: str) -> str:
    """The name of ``member``'s SQLite file in its data directory: its name with ``-``
    for ``_`` (remote_risk's ``remote-risk.db``, the legal team's ``legal-terms.db``)."""
    return member.replace("_", "-") + ".db"


def database_url_for(data_dir: str | os.PathLike[str], member: str) -> str:
    """The SQLite URL of ``member``'s database file in ``data_dir``: the file named after
    it, or the one every member's was called before (:data:`DATABASE_FILE`) if only that
    one is there (a member started by an earlier version goes on with what it stored)."""
    named = Path(data_dir) / database_file(member)
    if not named.exists() and (Path(data_dir) / DATABASE_FILE).exists():
        return DATABASE.url_in(data_dir)
    return replace(DATABASE, file_name=named.name).url_in(data_dir)


def open_engine(
    database_url: str | None = None, data_dir: Path | None = None, member: str | None = None
) -> Engine:
    """An engine for ``database_url``, else for ``member``'s file in ``data_dir``."""
    with shared_translated():
        if database_url is None:
            if data_dir is None or member is None:
                raise ValueError(
                    "open_engine needs a database URL, or a data directory and its member"
                )
            database_url = database_url_for(created(data_dir), member)
        return DATABASE.open(database_url)


def driver_write(engine: Engine, *, savepoint: bool = False) -> AbstractContextManager[DBAPICursor]:
    """A write transaction on the driver's own connection: a cursor for fixed SQL.

    On SQLite it holds the write lock from ``BEGIN IMMEDIATE``. Opened while another one
    is open on the same engine in this context, it joins that one instead, so everything
    done inside (e.g. the replay guard's claim made while the task store inserts the task
    the token creates) commits or rolls back together. Joined with ``savepoint``, what is
    done inside is undone alone when it raises, and the outer transaction can go on (on
    PostgreSQL a failed statement otherwise spoils the whole transaction). Driver
    exceptions are not wrapped; :func:`driver_errors` names their classes. A transaction
    that fails on a storage fault drops its connection (:func:`undo`): the next write is
    made on a fresh one.

    Joining costs a look at a context variable and no transaction of its own: a blocking
    send's store, guard and log each open "their" write inside the send's one.
    """
    joined = _open_write.get()
    if joined is not None and joined.engine is engine:
        return _savepoint(joined) if savepoint else joined
    return _driver_transaction(engine, "BEGIN IMMEDIATE")


def driver_read(engine: Engine) -> AbstractContextManager[DBAPICursor]:
    """A read-only :func:`driver_write`: no write lock on SQLite (a plain ``BEGIN``)."""
    joined = _open_write.get()
    if joined is not None and joined.engine is engine:
        return joined
    return _driver_transaction(engine, "BEGIN")


def transaction_notes(engine: Engine) -> dict[object, Any] | None:
    """What the writers in the driver transaction open on ``engine`` in this context note
    about what it holds so far (each under a key of its own), or None outside one.

    A note lives as long as the transaction and never outlasts it: a new transaction
    starts with none, and undoing any part of one (a savepoint rolled back) clears them
    all, since what they said may be what was undone. So a note is always a fact about
    the transaction's uncommitted writes, whoever made them in it (the sends of one turn,
    say)."""
    joined = _open_write.get()
    return joined.notes if joined is not None and joined.engine is engine else None


class _Joined:
    """The driver transaction open in this context, as a block joining it enters it: its
    cursor, and nothing to do at the block's end (the transaction's owner commits); its
    :func:`transaction_notes`."""

    __slots__ = ("cursor", "engine", "notes")

    def __init__(self, engine: Engine, cursor: DBAPICursor) -> None:
        self.engine = engine
        self.cursor = cursor
        self.notes: dict[object, Any] = {}

    def __enter__(self) -> DBAPICursor:
        return self.cursor

    def __exit__(self, *exc_info: object) -> None:
        return None


@contextmanager
def _driver_transaction(engine: Engine, sqlite_begin: str) -> Iterator[DBAPICursor]:
    """A transaction on the driver: on SQLite on the calling thread's own connection
    (:mod:`agent_cards.storage.held`), elsewhere on one of the pool's."""
    if engine.dialect.name == "sqlite":
        with thread_connection(engine) as kept:
            yield from _transaction_on(engine, kept.connection, sqlite_begin)
        return
    connection = engine.raw_connection()
    try:
        yield from _transaction_on(engine, connection, None)
    finally:
        connection.close()


def _transaction_on(
    engine: Engine, connection: Any, sqlite_begin: str | None
) -> Iterator[DBAPICursor]:
    cursor = connection.cursor()
    token = _open_write.set(_Joined(engine, cursor))
    try:
        if sqlite_begin is not None:
            cursor.execute(sqlite_begin)
        yield cursor
        connection.commit()
    except BaseException as error:
        cursor.close()
        undo(connection, connection.rollback, error)
        raise
    else:
        cursor.close()
    finally:
        _open_write.reset(token)


@contextmanager
def _savepoint(joined: _Joined) -> Iterator[DBAPICursor]:
    """The open transaction's cursor, for a block whose work is undone alone if it raises."""
    joined.cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        yield joined.cursor
    except BaseException:
        _undo_savepoint(joined)
        raise
    joined.cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")


def _undo_savepoint(joined: _Joined) -> None:
    """Undo what was done since the savepoint, and leave it; the transaction's notes go
    with it (see :func:`transaction_notes`)."""
    joined.notes.clear()
    joined.cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
    joined.cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")


# --- one commit a turn (SQLite, on the event loop) ------------------------------------------


class _Turn:
    """The write transaction the sends of one turn of the event loop share: opened by
    the first, committed when the turn ends (or sooner, when something else on the
    loop's thread uses the database)."""

    def __init__(self, engine: Engine, loop: asyncio.AbstractEventLoop) -> None:
        self.key = (engine, threading.get_ident())
        self._loop = loop
        self._held = thread_connection(engine)
        self.connection = self._held.__enter__().connection
        self.cursor = self.connection.cursor()
        self.joined = _Joined(engine, self.cursor)
        self.ended = False
        self.kept = 0  # the works the transaction holds
        self.after: list[Callable[[], None]] = []
        self._waiting: list[asyncio.Future[None]] = []
        try:
            self.cursor.execute("BEGIN IMMEDIATE")
        except BaseException as error:
            self._end(error)
            raise
        loop.call_soon(self.commit)

    def run(self, work: Callable[[], T]) -> T:
        """``work()`` in the turn's transaction, undone alone if it raises: in a
        savepoint once the transaction holds another's work (before that, undoing it is
        undoing the transaction). A fault that ends the transaction fails the turn."""
        alone = self.kept == 0
        token = _open_write.set(self.joined)
        try:
            if not alone:
                self.cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
            result = work()
            if not alone:
                self.cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        except BaseException as error:
            self._undo_one(error, alone)
            raise
        finally:
            _open_write.reset(token)
        self.kept += 1
        return result

    def committed(self) -> asyncio.Future[None]:
        """A future of the turn's commit, for one send (resolved when the turn ends)."""
        waiter = self._loop.create_future()
        self._waiting.append(waiter)
        return waiter

    def commit(self) -> None:
        if self.ended:
            return  # ended already: a fault, or committed before the turn's end
        try:
            self.connection.commit()
        except BaseException as error:
            self._end(error)
            return
        self._end(None)
        for callback in self.after:
            callback()

    def _undo_one(self, error: BaseException, alone: bool) -> None:
        if self.ended:
            return
        if alone or is_storage_fault(error) or not self.connection.in_transaction:
            self._end(error)  # the transaction goes, with whatever it held
            return
        try:
            _undo_savepoint(self.joined)
        except BaseException as undone:
            self._end(undone)

    def _end(self, error: BaseException | None) -> None:
        self.ended = True
        if _TURNS.get(self.key) is self:
            del _TURNS[self.key]
        self.cursor.close()
        if error is not None:
            undo(self.connection, self.connection.rollback, error)
        self._held.__exit__(None, None, None)
        for waiter in self._waiting:
            if waiter.done():  # its send gave up (cancelled)
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
            _ANSWERS.waiting += 1


# The most sends one turn's transaction holds before it commits (see the module).
MAX_SENDS_A_COMMIT = 8
# The turn open on each engine, by the thread whose loop opened it (its connection's).
_TURNS: dict[tuple[Engine, int], _Turn] = {}
_WATCHED: weakref.WeakSet[Engine] = weakref.WeakSet()


async def in_turn(engine: Engine, work: Callable[[], T]) -> T:
    """``work()`` (a send's transaction, on SQLite, from the event loop) in the write
    transaction this turn of the loop shares; returns once that is committed, raising
    what the commit raised (see the module's "One commit a turn")."""
    turn = _TURNS.get((engine, threading.get_ident()))
    if turn is None:
        _watch(engine)
        turn = _Turn(engine, asyncio.get_running_loop())
        _TURNS[turn.key] = turn
    result = turn.run(work)
    committed = turn.committed()
    if turn.kept >= MAX_SENDS_A_COMMIT:
        turn.commit()  # full: its sends answer now, the turn's next sends share another
    try:
        await committed
    finally:
        if committed.done() and not committed.cancelled():  # resumed: it answers now
            _ANSWERS.waiting -= 1
    return result


class _Answers(threading.local):
    """The sends of ended turns on this thread's loop that have not resumed yet."""

    waiting = 0


_ANSWERS = _Answers()


def answers_pending() -> bool:
    """Whether sends of a committed turn wait on this thread's loop to resume and answer
    (see the module's "Answers before new work")."""
    return _ANSWERS.waiting > 0


def commit_turn(engine: Engine | None) -> None:
    """Commit now the turn this thread holds open on ``engine``, if any (not from inside
    it): before this thread uses the database otherwise, or waits on something another
    thread may hold while that thread waits for the turn's write lock."""
    turn = _TURNS.get((engine, threading.get_ident())) if engine is not None else None
    if turn is not None and _open_write.get() is not turn.joined:
        turn.commit()


def after_commit(engine: Engine, callback: Callable[[], None]) -> None:
    """``callback()`` now, or, inside a turn's shared transaction, once it commits."""
    turn = _TURNS.get((engine, threading.get_ident()))
    if turn is not None and _open_write.get() is turn.joined:
        turn.after.append(callback)
    else:
        callback()


def _watch(engine: Engine) -> None:
    """Have an open turn commit before anything else on its thread takes a connection
    of ``engine`` (a read, another write), except what runs inside the turn itself."""
    if engine in _WATCHED:
        return
    _WATCHED.add(engine)
    event.listen(engine.pool, "checkout", lambda *_: commit_turn(engine))


def driver_errors(engine: Engine) -> Any:
    """The DB-API module of ``engine``'s driver: ``.IntegrityError``, ``.Error``."""
    return engine.dialect.loaded_dbapi


def driver_sql(engine: Engine, sql: str) -> str:
    """``sql`` written with ``:name`` placeholders, in the placeholder style of the driver."""
    return styled(engine.dialect.paramstyle, sql)
