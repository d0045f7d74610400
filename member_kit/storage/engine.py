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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
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
from agent_cards.storage.held import thread_connection
from member_kit.errors import shared_translated

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "DATABASE",
    "DATABASE_FILE",
    "database_file",
    "database_url_for",
    "driver_errors",
    "driver_read",
    "driver_sql",
    "driver_write",
    "open_engine",
    "read_transaction",
    "write_transaction",
]

# remote_risk's file; before each member's was named after it, every member's
DATABASE_FILE = "remote-risk.db"
DATABASE = Database(DATABASE_FILE, ("PRAGMA temp_store=MEMORY",))
_SAVEPOINT = "remote_risk_step"
# The driver-level transaction open in this context (thread or asyncio task), by engine.
_open_write: ContextVar[_Joined | None] = ContextVar("remote_risk_open_write", default=None)


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
        return _savepoint(joined.cursor) if savepoint else joined
    return _driver_transaction(engine, "BEGIN IMMEDIATE")


def driver_read(engine: Engine) -> AbstractContextManager[DBAPICursor]:
    """A read-only :func:`driver_write`: no write lock on SQLite (a plain ``BEGIN``)."""
    joined = _open_write.get()
    if joined is not None and joined.engine is engine:
        return joined
    return _driver_transaction(engine, "BEGIN")


class _Joined:
    """The driver transaction open in this context, as a block joining it enters it: its
    cursor, and nothing to do at the block's end (the transaction's owner commits)."""

    __slots__ = ("cursor", "engine")

    def __init__(self, engine: Engine, cursor: DBAPICursor) -> None:
        self.engine = engine
        self.cursor = cursor

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
def _savepoint(cursor: DBAPICursor) -> Iterator[DBAPICursor]:
    """``cursor``, for a block whose work is undone alone if it raises."""
    cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        yield cursor
    except BaseException:
        cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        raise
    cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")


def driver_errors(engine: Engine) -> Any:
    """The DB-API module of ``engine``'s driver: ``.IntegrityError``, ``.Error``."""
    return engine.dialect.loaded_dbapi


def driver_sql(engine: Engine, sql: str) -> str:
    """``sql`` written with ``:name`` placeholders, in the placeholder style of the driver."""
    return styled(engine.dialect.paramstyle, sql)
