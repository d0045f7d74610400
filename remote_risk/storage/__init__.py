"""remote_risk's durable store: its tasks and its record of used tokens in one database.

SQLite (a ``remote-risk.db`` file in the data directory) is the default; a database URL
selects PostgreSQL. The schema is owned by the Alembic revisions in
:mod:`remote_risk.storage.migrations` (version table ``remote_risk_alembic_version``),
applied on start by :func:`open_store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine

from remote_risk.storage.engine import DATABASE_FILE, database_url_for, open_engine
from remote_risk.storage.migrations import current_revision, migrate
from remote_risk.storage.replay import SQLReplayGuard
from remote_risk.storage.tasks import SQLTaskStore

__all__ = [
    "DATABASE_FILE",
    "DurableStore",
    "SQLReplayGuard",
    "SQLTaskStore",
    "current_revision",
    "database_url_for",
    "migrate",
    "open_engine",
    "open_store",
]


@dataclass(frozen=True)
class DurableStore:
    """The task store and replay guard of one service, over one migrated engine."""

    engine: Engine
    tasks: SQLTaskStore
    replay_guard: SQLReplayGuard

    def close(self) -> None:
        self.engine.dispose()


def open_store(
    capacity: int,
    *,
    database_url: str | None = None,
    data_dir: Path | None = None,
    leeway: timedelta = timedelta(seconds=30),
) -> DurableStore:
    """Open (and migrate) the database named by ``database_url``, else the one in
    ``data_dir``; raises :class:`~remote_risk.errors.StorageUnavailable`."""
    engine = open_engine(database_url, data_dir)
    try:
        migrate(engine)
    except BaseException:
        engine.dispose()
        raise
    return DurableStore(
        engine, SQLTaskStore(engine, capacity), SQLReplayGuard(engine, leeway=leeway)
    )
