"""Telling the database failing (retry later) from a bug (answer it).

A storage fault is a statement the database refused or failed for a reason of its own:
the file read-only or the disk full, an I/O error, a lock not granted in time, the server
gone or restarting, the pool exhausted. Such an error is worth retrying once the database
is back; a broken constraint or bad SQL is not one (a bug or a race, and retrying changes
nothing). :func:`is_storage_fault` looks for one along an error's causes.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable

from sqlalchemy import exc as sa_exc

__all__ = ["RETRY_AFTER_SECONDS", "faults", "is_fault_type", "is_storage_fault"]

# How long a caller is asked to wait before sending again after a storage fault.
RETRY_AFTER_SECONDS = 2

_FAULTS: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sqlite3.OperationalError,
)


def faults() -> tuple[type[BaseException], ...]:
    """The error types that are the database failing. PostgreSQL's driver is loaded only
    with a PostgreSQL URL (a process without it raises none of its errors), so its types
    are named only once it is."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return _FAULTS
    return (*_FAULTS, psycopg.OperationalError, psycopg.InterfaceError)


def is_fault_type(error: BaseException) -> bool:
    """Whether ``error`` itself (not its causes) is one of :func:`faults`."""
    return isinstance(error, faults())


def is_storage_fault(
    error: BaseException, is_fault: Callable[[BaseException], bool] | None = None
) -> bool:
    """Whether ``error``, or what caused it, is the database failing: one of
    :func:`faults`, or what ``is_fault`` (a service's own rule) says is one."""
    types = faults()
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, types) or (is_fault is not None and is_fault(current)):
            return True
        current = current.__cause__ or current.__context__
    return False
