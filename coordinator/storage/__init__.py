"""The coordinator's durable store: one SQLAlchemy layer over SQLite or PostgreSQL.

SQLite (a ``federation.db`` file in the data directory) is the embedded default; a
database URL selects PostgreSQL. The schema is owned by the Alembic revisions in
:mod:`coordinator.storage.migrations`, applied on start by :func:`migrate`.
"""

from __future__ import annotations

from coordinator.errors import LedgerError, StorageError
from coordinator.storage.engine import (
    DATABASE_FILE,
    database_url_for,
    open_engine,
    write_transaction,
)
from coordinator.storage.migrations import current_revision, migrate

__all__ = [
    "DATABASE_FILE",
    "LedgerError",
    "StorageError",
    "current_revision",
    "database_url_for",
    "migrate",
    "open_engine",
    "write_transaction",
]
