"""The kit's schema history as Alembic revisions, applied in code (no alembic.ini).

The runner is :mod:`agent_cards.storage.migrator`, shared with the coordinator. Versions
are recorded in ``remote_risk_alembic_version``, not Alembic's default table, so the
service can share a database with another Alembic-managed application. :func:`migrate`
is idempotent and safe for two processes starting at once.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from agent_cards.storage.migrator import Migrations
from member_kit.errors import shared_translated
from member_kit.storage.schema import VERSION_TABLE

MIGRATIONS_DIR = Path(__file__).parent
# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock ("RRMG").
MIGRATIONS = Migrations(MIGRATIONS_DIR, lock_class=0x52524D47, version_table=VERSION_TABLE)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database up to ``revision``; a database already there is left alone."""
    with shared_translated():
        MIGRATIONS.migrate(engine, revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for a database never migrated."""
    return MIGRATIONS.current_revision(engine)
