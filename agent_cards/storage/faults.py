"""Telling the database failing (retry later) from a bug (answer it).

A storage fault is a statement the database refused or failed for a reason of its own:
the file read-only or the disk full, an I/O error, a lock not granted in time, the server
gone or restarting, the pool exhausted. Such an error is worth retrying once the database
is back; a broken constraint or bad SQL is not one (a bug or a race, and retrying changes
nothing). :func:`is_storage_fault` looks for one along an error's causes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sqlalchemy import exc as sa_exc

__all__ = ["FAULTS", "is_storage_fault"]

FAULTS: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sqlite3.OperationalError,
)
try:  # PostgreSQL's driver is only needed with a PostgreSQL URL
    import psycopg

    FAULTS += (psycopg.OperationalError, psycopg.InterfaceError)
except ImportError:  # pragma: no cover
    pass


def is_storage_fault(
    error: BaseException, is_fault: Callable[[BaseException], bool] | None = None
) -> bool:
    """Whether ``error``, or what caused it, is the database failing: one of
    :data:`FAULTS`, or what ``is_fault`` (a service's own rule) says is one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, FAULTS) or (is_fault is not None and is_fault(current)):
            return True
        current = current.__cause__ or current.__context__
    return False
