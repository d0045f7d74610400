"""Signed tree heads: the heads the coordinator signed over its ledger, and those it witnessed.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "tree_heads",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("log_id", sa.String(256), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("tree_size", sa.BigInteger(), nullable=False),
        sa.Column("root_hash", sa.String(64), nullable=False),
        sa.Column("issued_at", sa.String(32), nullable=False),
        sa.Column("kid", sa.String(160), nullable=False),
        sa.Column("jws", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tree_heads"),
    )
    op.create_index("ix_tree_heads_log_id", "tree_heads", ["log_id"])


def downgrade() -> None:
    op.drop_index("ix_tree_heads_log_id", table_name="tree_heads")
    op.drop_table("tree_heads")
