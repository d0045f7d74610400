"""Open remote_risk's database: SQLite in the data directory by default, PostgreSQL by URL.

SQLite connections run in WAL mode with ``synchronous=NORMAL``. pysqlite's own
transaction handling is switched off so that we emit ``BEGIN`` ourselves: a plain
(deferred) ``BEGIN`` for readers and ``BEGIN IMMEDIATE`` inside :func:`write_transaction`,
which takes the write lock before the first read and so serialises read-then-write
sequences such as "make room, then insert".

The same pattern as the coordinator's store, kept separate on purpose: remote_risk is
another team's service and shares no code with the coordinator's storage.
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

from remote_risk.errors import StorageUnavailable

DATABASE_FILE = "remote-risk.db"
BUSY_TIMEOUT_SECONDS = 30.0
_BEGIN_OPTION = "sqlite_begin"
_SQLITE_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL")


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
