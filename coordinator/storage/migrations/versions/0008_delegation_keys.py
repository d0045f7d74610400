"""Submissions by Idempotency-Key: the run each key created, kept a day.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "delegation_keys",
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("request_digest", sa.String(80), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("attempt_id", sa.String(160), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("idempotency_key", name="pk_delegation_keys"),
    )
    op.create_index("ix_delegation_keys_created_at", "delegation_keys", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_delegation_keys_created_at", "delegation_keys")
    op.drop_table("delegation_keys")
