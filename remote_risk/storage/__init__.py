"""remote_risk's durable store: its tasks and its record of used tokens in one database.

SQLite (a ``remote-risk.db`` file in the data directory) is the default; a database URL
selects PostgreSQL. The schema is owned by the Alembic revisions in
:mod:`remote_risk.storage.migrations` (version table ``remote_risk_alembic_version``),
applied on start by :func:`remote_risk.server.store.open_store`.
"""

from __future__ import annotations

from remote_risk.storage.engine import DATABASE_FILE, database_url_for, open_engine
from remote_risk.storage.migrations import current_revision, migrate

__all__ = ["DATABASE_FILE", "current_revision", "database_url_for", "migrate", "open_engine"]
