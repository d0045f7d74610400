"""The coordinator's durable store: one SQLAlchemy layer over SQLite or PostgreSQL.

SQLite (a ``federation.db`` file in the data directory) is the embedded default; a
database URL selects PostgreSQL. The schema is owned by the Alembic revisions in
:mod:`coordinator.storage.migrations`, applied on start by its ``migrate``.
"""

__all__: list[str] = []
