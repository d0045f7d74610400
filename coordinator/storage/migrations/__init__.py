"""The coordinator's schema history as Alembic revisions, applied in code (no alembic.ini).

The runner is :mod:`agent_cards.storage.migrator`, shared with the kit; here the
coordinator names its revisions (this folder), its lock and its version table (Alembic's
default, ``alembic_version``). :func:`migrate` is idempotent and safe for two processes
starting at once.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from agent_cards.storage.migrator import Migrations
from coordinator.errors import shared_translated

MIGRATIONS_DIR = Path(__file__).parent
# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock for migrations.
MIGRATIONS = Migrations(MIGRATIONS_DIR, lock_class=0x4D494752)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database up to ``revision``; a database already there is left alone."""
    with shared_translated():
        MIGRATIONS.migrate(engine, revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    return MIGRATIONS.current_revision(engine)
