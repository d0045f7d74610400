"""Witnessed heads kept under their verified signer, not only the log they name.

Each head of another log is now kept with ``signer``, the RFC 7638 thumbprint of the
pinned key that verified it, and is one row per ``(signer, log, size, root)``; the audit
route answers the heads of the signers asked for. Rows kept before were verified with a
key looked up by their ``kid`` among keys held only under their computed thumbprint, so
that ``kid`` is the signer: it is copied.

Revision ID: rr0005
Revises: rr0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0005"
down_revision: str | None = "rr0004"
branch_labels: str | None = None
depends_on: str | None = None

TABLE = "remote_risk_witnessed_heads"
PK = "pk_remote_risk_witnessed_heads"


def upgrade() -> None:
    with op.batch_alter_table(TABLE) as batch:
        batch.add_column(sa.Column("signer", sa.String(128), nullable=True))
    op.execute(f"UPDATE {TABLE} SET signer = kid")
    with op.batch_alter_table(TABLE, recreate="always") as batch:
        batch.alter_column("signer", existing_type=sa.String(128), nullable=False)
        batch.drop_constraint(PK, type_="primary")
        batch.create_primary_key(PK, ["signer", "log_id", "tree_size", "root_hash"])


def downgrade() -> None:
    with op.batch_alter_table(TABLE, recreate="always") as batch:
        batch.drop_constraint(PK, type_="primary")
        batch.create_primary_key(PK, ["log_id", "tree_size", "root_hash"])
        batch.drop_column("signer")
