"""Task leases: which replica works an unfinished task, and until when.

Revision ID: rr0002
Revises: rr0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0002"
down_revision: str | None = "rr0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("remote_risk_tasks") as batch:
        batch.add_column(sa.Column("worker", sa.String(64), nullable=True))
        batch.add_column(sa.Column("lease_until_ms", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("remote_risk_tasks") as batch:
        batch.drop_column("lease_until_ms")
        batch.drop_column("worker")
