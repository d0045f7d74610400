"""The schema's history as Alembic revisions, applied in code: no alembic.ini needed.

Versions are recorded in ``remote_risk_alembic_version``, not Alembic's default table, so
the service can share a database with another Alembic-managed application.
:func:`migrate` upgrades a database to the newest revision and is idempotent. It runs in
one write transaction (``BEGIN IMMEDIATE`` on SQLite, a transaction-level advisory lock
on PostgreSQL), so two processes starting at once do not migrate the same database twice.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from member_kit.errors import StorageUnavailable
from member_kit.storage.engine import write_transaction
from member_kit.storage.schema import VERSION_TABLE

MIGRATIONS_DIR = Path(__file__).parent
# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock ("RRMG").
_MIGRATION_LOCK_CLASS = 0x52524D47


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration built in code, bound to ``connection`` when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database up to ``revision``; a database already there is left alone."""
    try:
        with write_transaction(engine) as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"),
                    {"cls": _MIGRATION_LOCK_CLASS},
                )
            command.upgrade(alembic_config(connection), revision)
    except SQLAlchemyError as exc:
        raise StorageUnavailable(f"cannot migrate the database: {type(exc).__name__}") from exc


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for a database never migrated."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
