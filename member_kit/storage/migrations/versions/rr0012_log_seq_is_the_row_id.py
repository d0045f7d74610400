"""On SQLite the decision log's ``seq`` is the row id, not a key of its own.

Declared BIGINT, the log's primary key was a B-tree of its own beside the table's,
written with every entry: one page more in each commit of a send. Declared INTEGER
(:data:`agent_cards.storage.schema.SEQUENCE_KEY`), it is the row id itself. SQLite
cannot change a column's type in place, so the table is built again with its rows
(once; it takes as long as copying the log). PostgreSQL keeps its BIGINT key.

Revision ID: rr0012
Revises: rr0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0012"
down_revision: str | None = "rr0011"
branch_labels: str | None = None
depends_on: str | None = None

_LOG = "remote_risk_audit_log"


def upgrade() -> None:
    _seq_declared_as(sa.Integer(), sa.BigInteger())


def downgrade() -> None:
    _seq_declared_as(sa.BigInteger(), sa.Integer())


def _seq_declared_as(wanted: sa.types.TypeEngine[int], stored: sa.types.TypeEngine[int]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(_LOG, recreate="always") as batch:
        batch.alter_column("seq", type_=wanted, existing_type=stored, existing_nullable=False)
