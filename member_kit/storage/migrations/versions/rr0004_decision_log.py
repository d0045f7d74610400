"""The decision log as a Merkle log, and the heads of other logs this service was shown.

Revision ID: rr0004
Revises: rr0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0004"
down_revision: str | None = "rr0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "remote_risk_audit_log",
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("entry_key", sa.String(512), nullable=True),
        sa.Column("handoff_id", sa.String(256), nullable=True),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("canonical", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_remote_risk_audit_log"),
        sa.UniqueConstraint("entry_key", name="uq_remote_risk_audit_log_entry_key"),
    )
    op.create_index("ix_remote_risk_audit_log_handoff_id", "remote_risk_audit_log", ["handoff_id"])
    op.create_table(
        "remote_risk_witnessed_heads",
        sa.Column("log_id", sa.String(1024), nullable=False),
        sa.Column("tree_size", sa.BigInteger(), nullable=False),
        sa.Column("root_hash", sa.String(64), nullable=False),
        sa.Column("kid", sa.String(128), nullable=False),
        sa.Column("jws", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint(
            "log_id", "tree_size", "root_hash", name="pk_remote_risk_witnessed_heads"
        ),
    )


def downgrade() -> None:
    op.drop_table("remote_risk_witnessed_heads")
    op.drop_index("ix_remote_risk_audit_log_handoff_id", table_name="remote_risk_audit_log")
    op.drop_table("remote_risk_audit_log")
