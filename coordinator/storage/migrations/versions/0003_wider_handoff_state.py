"""Handoff states up to 32 characters (``RETURNED_UNVERIFIED`` does not fit in 16).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("handoffs") as batch:
        batch.alter_column(
            "state", existing_type=sa.String(16), type_=sa.String(32), existing_nullable=False
        )


def downgrade() -> None:
    with op.batch_alter_table("handoffs") as batch:
        batch.alter_column(
            "state", existing_type=sa.String(32), type_=sa.String(16), existing_nullable=False
        )
