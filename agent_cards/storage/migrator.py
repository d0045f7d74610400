"""A service's schema history as Alembic revisions, applied in code: no alembic.ini needed.

A service names its revisions' folder (which holds Alembic's ``env.py``, calling
:func:`run_migrations` with the service's metadata), the class half of the PostgreSQL
advisory lock its migrations take, and the table its version is kept in.
:meth:`Migrations.migrate` upgrades a database to the newest revision and is idempotent.
It runs in one write transaction (``BEGIN IMMEDIATE`` on SQLite, a transaction-level
advisory lock on PostgreSQL), so two processes starting at once do not migrate the same
database twice.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Connection, Engine, Integer, MetaData, text
from sqlalchemy.exc import SQLAlchemyError

from agent_cards.errors import MIGRATION_FAILED, StorageFailure
from agent_cards.storage.engine import write_transaction

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["DEFAULT_VERSION_TABLE", "Migrations", "declare_sequence_key", "run_migrations"]

DEFAULT_VERSION_TABLE = "alembic_version"
_CONNECTION, _VERSION_TABLE = "connection", "version_table"


@dataclass(frozen=True)
class Migrations:
    """One service's revisions: where they are, its lock, its version table."""

    directory: Path
    lock_class: int
    version_table: str = DEFAULT_VERSION_TABLE

    def config(self, connection: Connection | None = None) -> Config:
        """An Alembic configuration built in code, bound to ``connection`` when given."""
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(self.directory))
        config.attributes[_VERSION_TABLE] = self.version_table
        if connection is not None:
            config.attributes[_CONNECTION] = connection
        return config

    def migrate(self, engine: Engine, revision: str = "head") -> None:
        """Bring the database up to ``revision``; a database already there is left alone
        (found by one query, without loading Alembic: most processes open a database
        that is already at its newest revision)."""
        if revision == "head" and self._at_newest(engine):
            return
        from alembic import command

        try:
            with write_transaction(engine) as connection:
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"),
                        {"cls": self.lock_class},
                    )
                command.upgrade(self.config(connection), revision)
        except SQLAlchemyError as exc:
            message = f"cannot migrate the database: {type(exc).__name__}"
            raise StorageFailure(MIGRATION_FAILED, message) from exc

    def _at_newest(self, engine: Engine) -> bool:
        newest = newest_revision(self.directory)
        if newest is None:
            return False
        try:
            with engine.connect() as connection:
                found = connection.execute(text(f"SELECT version_num FROM {self.version_table}"))
                return [row[0] for row in found] == [newest]
        except SQLAlchemyError:
            return False  # no version table yet: a new database, migrated the long way

    def current_revision(self, engine: Engine) -> str | None:
        """The revision the database is at, or None for a database never migrated."""
        from alembic.runtime.migration import MigrationContext

        with engine.connect() as connection:
            options = {"version_table": self.version_table}
            return MigrationContext.configure(connection, opts=options).get_current_revision()


_REVISION = re.compile(r'^revision(?:: str)? = "([^"]+)"$', re.MULTILINE)
_REVISES = re.compile(r'^down_revision(?:: [^=]+)? = "([^"]+)"$', re.MULTILINE)


@functools.cache
def newest_revision(directory: Path) -> str | None:
    """The one revision in ``directory/versions`` that no other revises, read from the
    files as text (Alembic's own answer costs its import); None unless there is exactly
    one (a branched history is left to Alembic)."""
    revisions, revised = set(), set()
    for path in (directory / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revisions.update(_REVISION.findall(source))
        revised.update(_REVISES.findall(source))
    heads = revisions - revised
    return heads.pop() if len(heads) == 1 else None


def run_migrations(metadata: MetaData) -> None:
    """The body of a service's Alembic ``env.py``: run on the connection that
    :meth:`Migrations.migrate` hands over, never offline."""
    from alembic import context

    if context.is_offline_mode():
        raise RuntimeError("offline (SQL script) migrations are not supported")
    connection = context.config.attributes.get(_CONNECTION)
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through the service's migrate(engine)")
    version_table = context.config.attributes.get(_VERSION_TABLE, DEFAULT_VERSION_TABLE)
    context.configure(connection=connection, target_metadata=metadata, version_table=version_table)
    with context.begin_transaction():
        context.run_migrations()


def declare_sequence_key(table: str, *, as_row_id: bool) -> None:
    """For a revision: on SQLite, build ``table`` again with its ``seq`` key declared
    INTEGER, the row id itself (:data:`~agent_cards.storage.schema.SEQUENCE_KEY`), or,
    ``as_row_id`` false, BIGINT, a key B-tree of its own. SQLite cannot change a column's
    type in place, so the rows are copied; elsewhere the key stays as it is."""
    from alembic import op

    if op.get_bind().dialect.name != "sqlite":
        return
    wanted, stored = (Integer(), BigInteger()) if as_row_id else (BigInteger(), Integer())
    with op.batch_alter_table(table, recreate="always") as batch:
        batch.alter_column("seq", type_=wanted, existing_type=stored, existing_nullable=False)
