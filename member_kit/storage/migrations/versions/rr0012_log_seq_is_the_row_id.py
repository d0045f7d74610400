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

from agent_cards.storage.migrator import declare_sequence_key

revision: str = "rr0012"
down_revision: str | None = "rr0011"
branch_labels: str | None = None
depends_on: str | None = None

_LOG = "remote_risk_audit_log"


def upgrade() -> None:
    declare_sequence_key(_LOG, as_row_id=True)


def downgrade() -> None:
    declare_sequence_key(_LOG, as_row_id=False)
