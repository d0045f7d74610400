"""Telling the database failing (retry later) from a bug (answer it, end the task).

A storage fault is a statement the database refused or failed for a reason of its own:
the file read-only or the disk full, an I/O error, a lock not granted in time, the server
gone. Work cut off by one is not a failure of the task: its lease runs out and the task
is resumed once the database is back (see :mod:`member_kit.tasks.leases`).
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import exc as sa_exc

_FAULTS: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sqlite3.OperationalError,
)
try:  # PostgreSQL's driver is only needed with a PostgreSQL URL
    import psycopg

    _FAULTS += (psycopg.OperationalError, psycopg.InterfaceError)
except ImportError:  # pragma: no cover
    pass


def is_storage_fault(error: BaseException) -> bool:
    """Whether ``error``, or what caused it, is the database failing."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _FAULTS):
            return True
        current = current.__cause__ or current.__context__
    return False
