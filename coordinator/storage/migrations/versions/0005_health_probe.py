"""A one-row table that readiness writes to, so /healthz proves the database takes writes.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "health_probe",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("probed_at", sa.String(32), nullable=False),
        sa.Column("prober", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_health_probe"),
    )


def downgrade() -> None:
    op.drop_table("health_probe")
