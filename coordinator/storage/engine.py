"""Open the database: SQLite in the data directory by default, PostgreSQL by URL.

SQLite connections run in WAL mode with ``synchronous=NORMAL`` and foreign keys on.
pysqlite's own transaction handling is switched off so that we emit ``BEGIN`` ourselves:
a plain (deferred) ``BEGIN`` for readers and ``BEGIN IMMEDIATE`` inside
:func:`write_transaction`, which takes the write lock before the first read and so
serialises read-then-write sequences such as a ledger append.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agent_cards.edge.writer import Writer
from agent_cards.edge.writer import writer_of as shared_writer
from agent_cards.sqlite import replace_read_only
from coordinator.errors import DataDirError, StorageError
from coordinator.storage.datadir import DataDir
from coordinator.storage.faults import install_fault_handling

DATABASE_FILE = "federation.db"
# PostgreSQL connections are checked before use (pool_pre_ping) and replaced after this
# long, so one a server or a proxy dropped meanwhile is never handed out.
POOL_RECYCLE_SECONDS = 1800
BUSY_TIMEOUT_SECONDS = 30.0
# How long the idle checkpoint may hold writers back while it waits (see checkpoint).
CHECKPOINT_BUSY_MS = 50
_BEGIN_OPTION = "sqlite_begin"
# The WAL is kept bounded: an automatic checkpoint every 4,000 pages (about 16 MB) and,
# once a checkpoint has reset the WAL, the file is cut back to JOURNAL_SIZE_LIMIT bytes
# instead of keeping its largest size for good (with 10,000 pages and no limit it stayed
# at 41 MB next to a 14.7 MB database). A handoff step rewrites the same few pages (the
# ends of the ledger and its indexes, the handoff row), and a checkpoint copies each page
# once however often it changed, so checkpoints stay cheap. A long-lived worker also runs
# a TRUNCATE checkpoint when it is idle (see checkpoint). Durability is that of WAL with
# synchronous=NORMAL either way.
WAL_AUTOCHECKPOINT_PAGES = 4000
JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024
_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
    f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}",
)


def database_url_for(datadir_path: str | os.PathLike[str]) -> str:
    """The SQLite URL of the embedded database in a data directory."""
    return f"sqlite+pysqlite:///{Path(datadir_path) / DATABASE_FILE}"


def _url_of(target: str | os.PathLike[str] | DataDir) -> str:
    if isinstance(target, DataDir):
        target = target.root
    if isinstance(target, str) and "://" in target:
        return target
    data = DataDir(Path(target))
    try:
        data.create_private(DATABASE_FILE)  # 0600: SQLite gives its WAL files this mode
    except DataDirError as exc:
        raise StorageError(str(exc)) from None
    return database_url_for(data.root)


def open_engine(target: str | os.PathLike[str] | DataDir) -> Engine:
    """An engine for a database URL, or for ``federation.db`` in a data directory."""
    try:
        url = make_url(_url_of(target))
    except ArgumentError:
        raise StorageError("not a database URL", "bad_database_url") from None
    if url.get_backend_name() == "sqlite":
        engine = _sqlite_engine(url.render_as_string(hide_password=False))
    elif url.get_backend_name() == "postgresql":
        engine = create_engine(url, pool_pre_ping=True, pool_recycle=POOL_RECYCLE_SECONDS)
    else:
        raise StorageError(
            f"unsupported database {url.get_backend_name()!r}: use SQLite or PostgreSQL",
            "bad_database_url",
        )
    install_fault_handling(engine)
    return engine


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    database = make_url(url).database
    if database and database != ":memory:":
        replace_read_only(engine, Path(database))
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, see _begin
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


def checkpoint(engine: Engine) -> None:
    """On SQLite, copy the whole WAL into the database and truncate it to nothing; on
    PostgreSQL nothing to do.

    A TRUNCATE checkpoint holds the write lock while it waits for readers of an older
    snapshot, so a reader in another process (a backup, an operator's sqlite3 shell) would
    stall every write for the whole busy timeout. It waits CHECKPOINT_BUSY_MS at most and
    otherwise gives up, leaving what it copied; the next idle checkpoint tries again."""
    if engine.dialect.name != "sqlite":
        return
    connection = engine.raw_connection()  # outside any transaction, as a checkpoint must be
    try:
        cursor = connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {CHECKPOINT_BUSY_MS}")
            try:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:  # the connection goes back to the pool with the service's timeout
                cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        finally:
            cursor.close()
    finally:
        connection.close()


def writer_of(engine: Engine) -> Writer:
    """The process's one writer thread for ``engine``'s database (see
    :mod:`agent_cards.edge.writer`): durable points are committed there, grouped."""
    return shared_writer(engine, "federation-db-writer")
