"""A member's durable store: its tasks and its record of used tokens in one database.

SQLite (a file named after the member in its data directory, ``remote-risk.db`` for
remote_risk) is the default; a database URL selects PostgreSQL. A database is one
member's (:mod:`member_kit.storage.owner`). The schema is owned by the Alembic revisions in
:mod:`member_kit.storage.migrations` (version table ``remote_risk_alembic_version``),
applied on start by :func:`member_kit.server.store.open_store`.
"""

__all__: list[str] = []
