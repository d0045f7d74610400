"""No index on the ``log_id`` a tree head states.

Since revision 0007 heads are looked up by their origin and their verified ``signer``,
never by the ``log_id`` a head states about itself, so no query reads
``ix_tree_heads_log_id``; it was still written with every head, and a governed handoff
witnesses one (the remote's log head its receipt states).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.drop_index("ix_tree_heads_log_id", table_name="tree_heads")


def downgrade() -> None:
    op.create_index("ix_tree_heads_log_id", "tree_heads", ["log_id"])
