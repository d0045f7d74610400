"""Alembic environment: the shared runner with the kit's schema."""

from __future__ import annotations

from agent_cards.storage.migrator import run_migrations
from member_kit.storage.schema import metadata

run_migrations(metadata)
