"""The audit ledger: one hash-chained row per event.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=True),
        sa.Column("handoff_id", sa.String(128), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("remote_task_id", sa.String(256), nullable=True),
        sa.Column("trace_id", sa.String(64), nullable=True),
        sa.Column("canonical", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_run_id", "audit_events", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_run_id", table_name="audit_events")
    op.drop_table("audit_events")
