"""Tasks, the used-token record and the task sequence counter.

Revision ID: rr0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "remote_risk_tasks",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(2048), nullable=False),
        sa.Column("context_id", sa.Text(), nullable=False),
        sa.Column("state", sa.String(64), nullable=False),
        sa.Column("changed_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("history", sa.Text(), nullable=False),
        sa.Column("artifacts", sa.Text(), nullable=False),
        sa.Column("task_metadata", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.String(512), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_remote_risk_tasks"),
        sa.UniqueConstraint("owner", "idempotency_key", name="uq_remote_risk_tasks_idempotency"),
    )
    op.create_index(
        "ix_remote_risk_tasks_owner_changed",
        "remote_risk_tasks",
        ["owner", "changed_at_ms", "sequence"],
    )
    op.create_index(
        "ix_remote_risk_tasks_state_changed",
        "remote_risk_tasks",
        ["state", "changed_at_ms", "sequence"],
    )
    op.create_table(
        "remote_risk_used_tokens",
        sa.Column("issuer", sa.String(1024), nullable=False),
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("issuer", "jti", name="pk_remote_risk_used_tokens"),
    )
    op.create_index(
        "ix_remote_risk_used_tokens_expires_at", "remote_risk_used_tokens", ["expires_at"]
    )
    counters = op.create_table(
        "remote_risk_counters",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_remote_risk_counters"),
    )
    op.bulk_insert(counters, [{"name": "task_sequence", "value": 0}])


def downgrade() -> None:
    op.drop_table("remote_risk_counters")
    op.drop_index("ix_remote_risk_used_tokens_expires_at", table_name="remote_risk_used_tokens")
    op.drop_table("remote_risk_used_tokens")
    op.drop_index("ix_remote_risk_tasks_state_changed", table_name="remote_risk_tasks")
    op.drop_index("ix_remote_risk_tasks_owner_changed", table_name="remote_risk_tasks")
    op.drop_table("remote_risk_tasks")
