"""Readiness: one real write, so that "ready" means the database takes writes now.

:func:`probe_write` upserts the single ``health_probe`` row and commits; it fails exactly
when writes fail (a read-only or full disk, an I/O error, a server gone), which a
``SELECT 1`` does not notice.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime

from sqlalchemy import Engine

from coordinator.errors import StorageError
from coordinator.storage import driver
from coordinator.storage.engine import write_transaction
from coordinator.storage.faults import is_storage_fault, recycle
from coordinator.storage.schema import health_probe

_PROBE_SQL = f"UPDATE {health_probe.name} SET probed_at = :probed_at, prober = :prober WHERE id = 1"
_PROBE_INSERT = driver.insert_sql(health_probe.name, ("id", "probed_at", "prober"))


def probe_write(engine: Engine) -> None:
    """Commit one small write; raises :class:`StorageError` when the database refuses it."""
    values = {"id": 1, "probed_at": datetime.now(UTC).isoformat(), "prober": _prober()}
    try:
        with write_transaction(engine) as connection:
            cursor = driver.execute(connection, _PROBE_SQL, values)
            if cursor.rowcount == 0:
                driver.execute(connection, _PROBE_INSERT, values)
    except Exception as exc:
        if isinstance(exc, StorageError) or is_storage_fault(exc):
            recycle(engine)
            raise StorageError(
                f"the database does not take writes: {type(exc).__name__}",
                "storage_unavailable",
            ) from None
        raise


def _prober() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
