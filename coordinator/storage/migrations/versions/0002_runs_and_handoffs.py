"""Runs, handoffs (with their driver lease), artifacts, budget units, grants, card versions.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("authority", sa.Text(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_table(
        "handoffs",
        sa.Column("attempt_id", sa.String(160), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("handoff_id", sa.String(128), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(256), nullable=False),
        sa.Column("remote_task_id", sa.String(256), nullable=True),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("contract", sa.String(16), nullable=False),
        sa.Column("driver", sa.String(128), nullable=True),
        sa.Column("driver_until", sa.Float(), nullable=True),
        sa.Column("updated_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("attempt_id", name="pk_handoffs"),
    )
    op.create_index("ix_handoffs_run_id", "handoffs", ["run_id"])
    op.create_index("ix_handoffs_state", "handoffs", ["state"])
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("attempt_id", sa.String(160), nullable=False),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(80), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("received_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_artifacts"),
    )
    op.create_index("ix_artifacts_run_id", "artifacts", ["run_id"])
    op.create_table(
        "budget_units",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("attempt_id", sa.String(160), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("actions", sa.Integer(), nullable=False),
        sa.Column("context_units", sa.Integer(), nullable=False),
        sa.Column("effects", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_budget_units"),
    )
    op.create_index("ix_budget_units_run_id", "budget_units", ["run_id"])
    op.create_table(
        "grants",
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("attempt_id", sa.String(160), nullable=False),
        sa.Column("claims_digest", sa.String(80), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("aud", sa.Text(), nullable=False),
        sa.Column("exp", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("jti", name="pk_grants"),
    )
    op.create_table(
        "card_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("agent", sa.String(256), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("card", sa.Text(), nullable=False),
        sa.Column("card_digest", sa.String(80), nullable=False),
        sa.Column("verified_kid", sa.String(160), nullable=True),
        sa.Column("trust", sa.String(32), nullable=False),
        sa.Column("pinned_jwks", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_card_versions"),
    )
    op.create_index("ix_card_versions_agent", "card_versions", ["agent"])


def downgrade() -> None:
    for table in ("card_versions", "grants", "budget_units", "artifacts", "handoffs", "runs"):
        op.drop_table(table)
