"""Revocation and holder-proof replay state, kept across a restart.

Revision ID: rr0007
Revises: rr0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0007"
down_revision: str | None = "rr0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "remote_risk_revoked_handoffs",
        sa.Column("issuer", sa.String(1024), nullable=False),
        sa.Column("handoff_id", sa.String(256), nullable=False),
        sa.Column("keep_until", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("issuer", "handoff_id", name="pk_remote_risk_revoked_handoffs"),
    )
    op.create_index(
        "ix_remote_risk_revoked_handoffs_keep_until", "remote_risk_revoked_handoffs", ["keep_until"]
    )
    op.create_table(
        "remote_risk_revocation_pushes",
        sa.Column("issuer", sa.String(1024), nullable=False),
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("issuer", "jti", name="pk_remote_risk_revocation_pushes"),
    )
    op.create_index(
        "ix_remote_risk_revocation_pushes_expires_at",
        "remote_risk_revocation_pushes",
        ["expires_at"],
    )
    op.create_table(
        "remote_risk_watched_grants",
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("forget_at", sa.BigInteger(), nullable=False),
        sa.Column("claims", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("jti", name="pk_remote_risk_watched_grants"),
    )
    op.create_index(
        "ix_remote_risk_watched_grants_forget_at", "remote_risk_watched_grants", ["forget_at"]
    )
    op.create_table(
        "remote_risk_holder_proofs",
        sa.Column("jkt", sa.String(128), nullable=False),
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("jkt", "jti", name="pk_remote_risk_holder_proofs"),
    )
    op.create_index(
        "ix_remote_risk_holder_proofs_expires_at", "remote_risk_holder_proofs", ["expires_at"]
    )


def downgrade() -> None:
    op.drop_table("remote_risk_holder_proofs")
    op.drop_table("remote_risk_watched_grants")
    op.drop_table("remote_risk_revocation_pushes")
    op.drop_table("remote_risk_revoked_handoffs")
