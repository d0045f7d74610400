"""Open the coordinator's database: SQLite in the data directory by default, PostgreSQL by URL.

The mechanics (WAL, our own ``BEGIN``, write transactions, the idle checkpoint) are
:mod:`agent_cards.storage.engine`, shared with the kit. Here the coordinator names its
file (``federation.db``), turns foreign keys on, recycles PostgreSQL connections after
half an hour (so one a server or a proxy dropped meanwhile is never handed out), has
SQLAlchemy recycle the pool after a storage fault
(:mod:`coordinator.storage.faults`) and raises :class:`~coordinator.errors.StorageError`.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine

from agent_cards.storage.engine import (
    BUSY_TIMEOUT_SECONDS,
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
    Database,
    checkpoint,
    driver_write_transaction,
    write_transaction,
)
from agent_cards.storage.in_place import WouldWait, sqlite_in_place
from agent_cards.storage.writer import Writer
from agent_cards.storage.writer import writer_of as shared_writer
from coordinator.errors import DataDirError, StorageError, shared_translated
from coordinator.storage.datadir import DataDir
from coordinator.storage.faults import install_fault_handling

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "DATABASE",
    "DATABASE_FILE",
    "JOURNAL_SIZE_LIMIT",
    "WAL_AUTOCHECKPOINT_PAGES",
    "WouldWait",
    "checkpoint",
    "database_url_for",
    "driver_write_transaction",
    "open_engine",
    "write_transaction",
    "writer_of",
]

DATABASE_FILE = "federation.db"
POOL_RECYCLE_SECONDS = 1800
DATABASE = Database(DATABASE_FILE, ("PRAGMA foreign_keys=ON",), POOL_RECYCLE_SECONDS)


def database_url_for(datadir_path: str | os.PathLike[str]) -> str:
    """The SQLite URL of the embedded database in a data directory."""
    return DATABASE.url_in(datadir_path)


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
    url = _url_of(target)
    with shared_translated():
        engine = DATABASE.open(url)
    install_fault_handling(engine)
    return engine


def writer_of(engine: Engine) -> Writer:
    """The process's one writer thread for ``engine``'s database (see
    :mod:`agent_cards.storage.writer`): durable points are committed there, grouped; on
    SQLite, on the event loop's own thread when nothing would wait (its "In place")."""
    writer = shared_writer(engine, "federation-db-writer")
    if writer.in_place is None and engine.dialect.name == "sqlite":
        writer.in_place = sqlite_in_place(engine)
    return writer
