"""Idempotency keys kept for a retention window, apart from the tasks (which are evicted).

Keys of the tasks already stored are carried over, expiring a day after their task's
last status change (the default window).

Revision ID: rr0003
Revises: rr0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0003"
down_revision: str | None = "rr0002"
branch_labels: str | None = None
depends_on: str | None = None

_DAY_MS = 86_400_000


def upgrade() -> None:
    op.create_table(
        "remote_risk_idempotency_keys",
        sa.Column("owner", sa.String(2048), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=False),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("retained_task", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("owner", "idempotency_key", name="pk_remote_risk_idempotency_keys"),
    )
    op.create_index(
        "ix_remote_risk_idempotency_keys_expires_at_ms",
        "remote_risk_idempotency_keys",
        ["expires_at_ms"],
    )
    op.create_index(
        "ix_remote_risk_idempotency_keys_task_id", "remote_risk_idempotency_keys", ["task_id"]
    )
    op.execute(
        "INSERT INTO remote_risk_idempotency_keys (owner, idempotency_key, task_id, "
        f"expires_at_ms) SELECT owner, idempotency_key, id, changed_at_ms + {_DAY_MS} "
        "FROM remote_risk_tasks WHERE idempotency_key IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index(
        "ix_remote_risk_idempotency_keys_task_id", table_name="remote_risk_idempotency_keys"
    )
    op.drop_index(
        "ix_remote_risk_idempotency_keys_expires_at_ms",
        table_name="remote_risk_idempotency_keys",
    )
    op.drop_table("remote_risk_idempotency_keys")
