"""Open remote_risk's database: SQLite in the data directory by default, PostgreSQL by URL.

SQLite connections run in WAL mode with ``synchronous=NORMAL``. pysqlite's own
transaction handling is switched off so that we emit ``BEGIN`` ourselves: a plain
(deferred) ``BEGIN`` for readers and ``BEGIN IMMEDIATE`` inside :func:`write_transaction`,
which takes the write lock before the first read and so serialises read-then-write
sequences such as "make room, then insert".

The hot paths (a send's task and its token claim) run fixed SQL straight on the driver's
connection in :func:`driver_write`: building and compiling a Core statement per call cost
several times what SQLite takes to run it. Their SQL is written with ``:name``
placeholders and translated once per driver by :func:`driver_sql`.

The same pattern as the coordinator's store, kept separate on purpose: remote_risk is
another team's service and shares no code with the coordinator's storage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import ArgumentError

from agent_cards.sqlite import replace_read_only
from member_kit.errors import StorageUnavailable

DATABASE_FILE = "remote-risk.db"
BUSY_TIMEOUT_SECONDS = 30.0
_BEGIN_OPTION = "sqlite_begin"
# A checkpoint every 4,000 WAL pages (about 16 MB) instead of SQLite's 1,000: a send
# changes some 20 pages, many of them the same ones (the counter, the ends of the
# indexes), and a checkpoint copies a page once however often it changed since the last
# one. Once a checkpoint has reset the WAL its file is cut back to 16 MB, so the WAL
# stays bounded (with 10,000 pages and no limit it stayed at 39 MB next to a 2 MB
# database in the soak). Durability is that of WAL with synchronous=NORMAL either way.
# Statement and savepoint journals in memory: they only serve rolling back part of an open
# transaction (never recovery after a crash), and as temporary files a savepoint around a
# task's insert cost more than the commit it saves.
_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA wal_autocheckpoint=4000",
    f"PRAGMA journal_size_limit={16 * 1024 * 1024}",
    "PRAGMA temp_store=MEMORY",
)
_NAMED_PLACEHOLDER = re.compile(r":(\w+)")
_SAVEPOINT = "remote_risk_step"
# The driver-level transaction open in this context (thread or asyncio task), by engine.
_open_write: ContextVar[tuple[Engine, DBAPICursor] | None] = ContextVar(
    "remote_risk_open_write", default=None
)


def database_url_for(data_dir: str | os.PathLike[str]) -> str:
    """The SQLite URL of the service's database file in ``data_dir``."""
    return f"sqlite+pysqlite:///{Path(data_dir) / DATABASE_FILE}"


def open_engine(database_url: str | None = None, data_dir: Path | None = None) -> Engine:
    """An engine for ``database_url``, else for ``remote-risk.db`` in ``data_dir``."""
    if database_url is None:
        if data_dir is None:
            raise ValueError("open_engine needs a database URL or a data directory")
        database_url = database_url_for(_created(data_dir))
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise StorageUnavailable("the database URL is not a database URL") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url.render_as_string(hide_password=False))
    if backend == "postgresql":
        return create_engine(url, pool_pre_ping=True)
    raise StorageUnavailable(f"unsupported database {backend!r}: use SQLite or PostgreSQL")


def _created(data_dir: Path) -> Path:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageUnavailable(f"cannot create the data directory: {exc.strerror}") from None
    return data_dir


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    database = make_url(url).database
    if database and database != ":memory:":
        replace_read_only(engine, Path(database))
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()


def _begin_sqlite_transaction(connection: Connection) -> None:
    mode = connection.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that intends to write: on SQLite it holds the write lock from BEGIN."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            connection.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
        with connection.begin():
            yield connection


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that only reads: one consistent view, no write lock."""
    with engine.connect() as connection, connection.begin():
        yield connection


@contextmanager
def driver_write(engine: Engine, *, savepoint: bool = False) -> Iterator[DBAPICursor]:
    """A write transaction on the driver's own connection: a cursor for fixed SQL.

    On SQLite it holds the write lock from ``BEGIN IMMEDIATE``. Opened while another one
    is open on the same engine in this context, it joins that one instead, so everything
    done inside (e.g. the replay guard's claim made while the task store inserts the task
    the token creates) commits or rolls back together. Joined with ``savepoint``, what is
    done inside is undone alone when it raises, and the outer transaction can go on (on
    PostgreSQL a failed statement otherwise spoils the whole transaction). Driver
    exceptions are not wrapped; :func:`driver_errors` names their classes.
    """
    with _driver_transaction(engine, "BEGIN IMMEDIATE", savepoint=savepoint) as cursor:
        yield cursor


@contextmanager
def driver_read(engine: Engine) -> Iterator[DBAPICursor]:
    """A read-only :func:`driver_write`: no write lock on SQLite (a plain ``BEGIN``)."""
    with _driver_transaction(engine, "BEGIN") as cursor:
        yield cursor


@contextmanager
def _driver_transaction(
    engine: Engine, sqlite_begin: str, *, savepoint: bool = False
) -> Iterator[DBAPICursor]:
    joined = _open_write.get()
    if joined is not None and joined[0] is engine:
        if savepoint:
            with _savepoint(joined[1]):
                yield joined[1]
        else:
            yield joined[1]
        return
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        token = _open_write.set((engine, cursor))
        try:
            if engine.dialect.name == "sqlite":
                cursor.execute(sqlite_begin)
            yield cursor
            connection.commit()
        except BaseException:
            _roll_back(connection)
            raise
        finally:
            _open_write.reset(token)
            cursor.close()
    finally:
        connection.close()


@contextmanager
def _savepoint(cursor: DBAPICursor) -> Iterator[None]:
    """Undo what the block did if it raises, and only that."""
    cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        yield
    except BaseException:
        cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        raise
    cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")


def _roll_back(connection: Any) -> None:
    """Roll back, or drop a connection that cannot (so the original error is the one seen)."""
    try:
        connection.rollback()
    except Exception:
        connection.invalidate()


def driver_errors(engine: Engine) -> Any:
    """The DB-API module of ``engine``'s driver: ``.IntegrityError``, ``.Error``."""
    return engine.dialect.loaded_dbapi


def driver_sql(engine: Engine, sql: str) -> str:
    """``sql`` written with ``:name`` placeholders, in the placeholder style of the driver."""
    return _in_style(engine.dialect.paramstyle, sql)


@lru_cache(maxsize=64)
def _in_style(paramstyle: str, sql: str) -> str:
    if paramstyle == "pyformat":  # psycopg
        return _NAMED_PLACEHOLDER.sub(r"%(\1)s", sql)
    return sql  # sqlite3 reads :name placeholders given a mapping, whatever it declares
