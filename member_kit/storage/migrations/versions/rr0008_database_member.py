"""Whose database it is: the one member whose replicas share it.

Revision ID: rr0008
Revises: rr0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0008"
down_revision: str | None = "rr0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "remote_risk_database_member",
        sa.Column("name", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_remote_risk_database_member"),
    )


def downgrade() -> None:
    op.drop_table("remote_risk_database_member")
