"""remote_risk's durable store: its tasks and its record of used tokens in one database.

SQLite (a ``remote-risk.db`` file in the data directory) is the default; a database URL
selects PostgreSQL. The schema is owned by the Alembic revisions in
:mod:`member_kit.storage.migrations` (version table ``remote_risk_alembic_version``),
applied on start by :func:`member_kit.server.store.open_store`.
"""

__all__: list[str] = []
