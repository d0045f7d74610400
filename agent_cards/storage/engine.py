"""Open a service's database: SQLite in its data directory by default, PostgreSQL by URL.

SQLite connections run in WAL mode with ``synchronous=NORMAL``. pysqlite's own
transaction handling is switched off so that we emit ``BEGIN`` ourselves: a plain
(deferred) ``BEGIN`` for readers and ``BEGIN IMMEDIATE`` inside :func:`write_transaction`,
which takes the write lock before the first read and so serialises read-then-write
sequences (a ledger append, "make room, then insert"). A hot write path can have that
transaction begun and committed on the driver's own connection instead
(:func:`driver_write_transaction`).

The WAL is kept bounded: an automatic checkpoint every 4,000 pages (about 16 MB) instead
of SQLite's 1,000 and, once a checkpoint has reset the WAL, the file is cut back to
16 MB instead of keeping its largest size for good (with 10,000 pages and no limit it
stayed at 39-41 MB next to databases of 2-15 MB in the soaks). A hot path rewrites the
same few pages (a counter, the ends of indexes and of the ledger), and a checkpoint copies
each page once however often it changed, so checkpoints stay cheap. Durability is that of
WAL with ``synchronous=NORMAL`` either way. A service adds its own pragmas
(:class:`Database`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agent_cards.errors import BAD_DATABASE_URL, STORAGE_UNAVAILABLE, StorageFailure
from agent_cards.storage import in_place
from agent_cards.storage.faults import is_storage_fault
from agent_cards.storage.held import thread_connection
from agent_cards.storage.sqlite import replace_read_only

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "WAL_PRAGMAS",
    "Database",
    "checkpoint",
    "created",
    "driver_write_transaction",
    "read_transaction",
    "undo",
    "write_transaction",
]

BUSY_TIMEOUT_SECONDS = 30.0
# How long the idle checkpoint may hold writers back while it waits (see checkpoint).
CHECKPOINT_BUSY_MS = 50
WAL_AUTOCHECKPOINT_PAGES = 4000
JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024
WAL_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
    f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}",
)
_BEGIN_OPTION = "sqlite_begin"


@dataclass(frozen=True)
class Database:
    """One service's database: its file in a data directory, the pragmas its SQLite
    connections run after :data:`WAL_PRAGMAS`, and how long PostgreSQL connections live
    (``-1``: as long as they work; they are checked before use either way)."""

    file_name: str
    sqlite_pragmas: tuple[str, ...] = ()
    pool_recycle_seconds: int = -1

    def url_in(self, data_dir: str | os.PathLike[str]) -> str:
        """The SQLite URL of the database file in ``data_dir``."""
        return f"sqlite+pysqlite:///{Path(data_dir) / self.file_name}"

    def open(self, database_url: str) -> Engine:
        """An engine for ``database_url`` (SQLite or PostgreSQL), or :class:`StorageFailure`."""
        try:
            url = make_url(database_url)
        except ArgumentError:
            raise StorageFailure(BAD_DATABASE_URL, "not a database URL") from None
        backend = url.get_backend_name()
        if backend == "sqlite":
            return self._sqlite_engine(url.render_as_string(hide_password=False))
        if backend == "postgresql":
            return create_engine(url, pool_pre_ping=True, pool_recycle=self.pool_recycle_seconds)
        raise StorageFailure(
            BAD_DATABASE_URL, f"unsupported database {backend!r}: use SQLite or PostgreSQL"
        )

    def _sqlite_engine(self, url: str) -> Engine:
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_SECONDS})
        pragmas = WAL_PRAGMAS + self.sqlite_pragmas

        def configure(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
            cursor = dbapi_connection.cursor()
            try:
                for pragma in pragmas:
                    cursor.execute(pragma)
            finally:
                cursor.close()

        event.listen(engine, "connect", configure)
        event.listen(engine, "begin", _begin_sqlite_transaction)
        database = make_url(url).database
        if database and database != ":memory:":
            replace_read_only(engine, Path(database))
        return engine


def created(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir``, made if it is missing, or :class:`StorageFailure`."""
    root = Path(data_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        message = f"cannot create the data directory: {exc.strerror}"
        raise StorageFailure(STORAGE_UNAVAILABLE, message) from None
    return root


def _begin_sqlite_transaction(connection: Connection) -> None:
    if connection.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        return  # a statement joining the transaction begun on the driver (see below)
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
def driver_write_transaction(engine: Engine) -> Iterator[Connection]:
    """:func:`write_transaction` for a hot path: on SQLite ``BEGIN IMMEDIATE`` and
    ``COMMIT`` run on the driver's own connection, not as statements of SQLAlchemy's (each
    costs several times what SQLite takes to run it; a durable point is one such
    transaction). What runs inside is unchanged: statements on the driver's cursor, or
    SQLAlchemy statements, which join the transaction (SQLAlchemy then commits it).

    A failed ``BEGIN``, ``COMMIT`` or ``ROLLBACK`` reaches the caller as the driver raised
    it, like any statement run on the driver's cursor (the caller tells a storage fault
    and recycles the pool), and the connection that saw it is never used again. On
    PostgreSQL this is :func:`write_transaction`."""
    if engine.dialect.name != "sqlite":
        with write_transaction(engine) as connection:
            yield connection
        return
    with thread_connection(engine) as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        if in_place.asked():  # on the event loop's thread: never wait (see in_place)
            _on_driver(connection, in_place.not_waiting, driver)
            try:
                in_place.begin(connection, driver)
                yield from _committed(connection, driver)
            finally:
                if not connection.invalidated:  # the connection's own rules again
                    _on_driver(connection, in_place.put_back, driver, *_OWN_RULES)
        else:
            _on_driver(connection, driver.execute, "BEGIN IMMEDIATE")
            yield from _committed(connection, driver)


# A connection's busy timeout (ms) and automatic checkpoint (pages), as it was opened.
_OWN_RULES = (int(BUSY_TIMEOUT_SECONDS * 1000), WAL_AUTOCHECKPOINT_PAGES)


def _committed(connection: Connection, driver: Any) -> Iterator[Connection]:
    """The begun transaction, to the caller, then committed (or rolled back)."""
    try:
        yield connection
    except BaseException as error:
        _roll_back(connection, driver, error)
        raise
    if connection.in_transaction():  # a SQLAlchemy statement joined the transaction
        connection.commit()
    else:
        _on_driver(connection, driver.commit)


def _on_driver(connection: Connection, call: Any, *args: Any) -> None:
    """``call(*args)`` on the driver; a connection whose call failed is dropped."""
    try:
        call(*args)
    except Exception:
        connection.invalidate()
        raise


def _roll_back(connection: Connection, driver: Any, error: BaseException) -> None:
    if connection.in_transaction():  # a SQLAlchemy statement joined: it rolls back
        undo(connection, connection.rollback, error)
    else:
        undo(connection, driver.rollback, error)


def undo(connection: Any, rollback: Callable[[], object], error: BaseException) -> None:
    """End a transaction that failed with ``error`` on ``connection`` (a SQLAlchemy
    connection, or the pool's raw one): a connection that saw a storage fault is dropped,
    which discards its transaction (a SQLite handle after an I/O error, or one SQLite
    opened read-only, is not trusted with another write); any other is rolled back with
    ``rollback``, and dropped if it cannot be (so ``error`` is the one the caller sees)."""
    if is_storage_fault(error):
        connection.invalidate()
        return
    try:
        rollback()
    except Exception:
        connection.invalidate()


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that only reads: one consistent view, no write lock."""
    with engine.connect() as connection, connection.begin():
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
