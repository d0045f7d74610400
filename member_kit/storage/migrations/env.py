"""Alembic environment: runs on the connection that :func:`migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from member_kit.storage.schema import VERSION_TABLE, metadata


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through member_kit.storage.migrations.migrate(engine)")
    context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported")
run_migrations_online()
