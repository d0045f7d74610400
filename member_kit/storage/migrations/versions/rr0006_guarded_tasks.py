"""The guard's record of whose each upstream task is, kept across a restart.

Revision ID: rr0006
Revises: rr0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0006"
down_revision: str | None = "rr0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "remote_risk_guarded_tasks",
        sa.Column("seq", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("task_id", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(2048), nullable=False),
        sa.Column("task_metadata", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(512), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_remote_risk_guarded_tasks"),
        sa.UniqueConstraint("task_id", name="uq_remote_risk_guarded_tasks_task_id"),
        sa.UniqueConstraint("owner", "idempotency_key", name="uq_remote_risk_guarded_tasks_key"),
    )


def downgrade() -> None:
    op.drop_table("remote_risk_guarded_tasks")
