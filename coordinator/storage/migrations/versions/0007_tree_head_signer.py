"""Tree heads keyed by their verified signer: the thumbprint of the key that verified them.

A witnessed head was looked up by the ``log_id`` its own claims state, so a registered
agent could file a head it signed under another agent's log. Each row now names its
``signer``: the RFC 7638 thumbprint of the key that verified it. Rows kept before this
revision were verified on the way in with a key found by its ``kid``, and pinned keys
are held only under their computed thumbprint, so their ``kid`` is that thumbprint: it
is copied.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("tree_heads") as batch:
        batch.add_column(sa.Column("signer", sa.String(160), nullable=True))
    op.execute("UPDATE tree_heads SET signer = kid")
    with op.batch_alter_table("tree_heads") as batch:
        batch.alter_column("signer", existing_type=sa.String(160), nullable=False)
        batch.create_index("ix_tree_heads_signer", ["signer"])


def downgrade() -> None:
    with op.batch_alter_table("tree_heads") as batch:
        batch.drop_index("ix_tree_heads_signer")
        batch.drop_column("signer")
