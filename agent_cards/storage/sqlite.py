"""What both services' SQLite engines share: a connection opened read-only is not kept.

When SQLite cannot open a database file for writing (a disk gone read-only, a file made
immutable) it does not fail: it opens the file read-only instead, silently. Such a
connection reads fine while the fault lasts, goes back to the pool, and once the fault is
over it is still read-only: the first write handed it fails with "attempt to write a
readonly database" although the database takes writes again. The same holds for the
WAL: a connection that opened it read-only (the fault ending on the database file first,
then on its WAL) is read-only for good. :func:`replace_read_only` marks each connection
opened while either file was not writable, and replaces a marked one at checkout as soon
as both are writable again, so readiness ("a write works") and the next write agree.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

_OPENED_READ_ONLY = "opened_read_only"

__all__ = ["opened_read_only", "replace_read_only"]


def replace_read_only(engine: Engine, database: Path) -> None:
    """Have ``engine`` drop connections SQLite opened read-only once ``database`` and
    its WAL are writable again."""
    files = (database, database.with_name(database.name + "-wal"))

    def on_connect(_dbapi_connection: Any, record: Any) -> None:
        # after the connection's pragmas ran: it has opened its WAL by now
        record.info[_OPENED_READ_ONLY] = not _writable(files)

    def on_checkout(_dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.get(_OPENED_READ_ONLY) and _writable(files):
            raise DisconnectionError("opened read-only while the database was not writable")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "checkout", on_checkout)


def opened_read_only(pooled: Any) -> bool:
    """Whether SQLite opened the pool's connection ``pooled`` while the database (or its
    WAL) was not writable: such a one must go back to the pool, which replaces it."""
    return bool(pooled.info.get(_OPENED_READ_ONLY))


def _writable(files: tuple[Path, ...]) -> bool:
    return all(not path.exists() or os.access(path, os.W_OK) for path in files)
