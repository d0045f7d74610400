"""On SQLite the ledger's ``seq`` is the row id, not a key of its own.

Declared BIGINT, the events' primary key was a B-tree of its own beside the table's,
written with every event (five a governed handoff): one page more in each commit.
Declared INTEGER (:data:`agent_cards.storage.schema.SEQUENCE_KEY`), it is the row id
itself. SQLite cannot change a column's type in place, so the table is built again with
its rows (once; it takes as long as copying the ledger). PostgreSQL keeps its BIGINT key.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

_EVENTS = "audit_events"


def upgrade() -> None:
    _seq_declared_as(sa.Integer(), sa.BigInteger())


def downgrade() -> None:
    _seq_declared_as(sa.BigInteger(), sa.Integer())


def _seq_declared_as(wanted: sa.types.TypeEngine[int], stored: sa.types.TypeEngine[int]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(_EVENTS, recreate="always") as batch:
        batch.alter_column("seq", type_=wanted, existing_type=stored, existing_nullable=False)
