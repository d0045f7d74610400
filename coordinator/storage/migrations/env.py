"""Alembic environment: the shared runner with the coordinator's schema."""

from __future__ import annotations

from agent_cards.storage.migrator import run_migrations
from coordinator.storage.schema import metadata

run_migrations(metadata)
