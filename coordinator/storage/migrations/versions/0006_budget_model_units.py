"""The run's budget ledger counts the federation's model requests and tokens.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("budget_units") as batch:
        batch.add_column(
            sa.Column("model_requests", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("model_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("budget_units") as batch:
        batch.drop_column("model_tokens")
        batch.drop_column("model_requests")
