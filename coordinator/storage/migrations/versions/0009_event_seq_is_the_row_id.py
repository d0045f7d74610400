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

from agent_cards.storage.migrator import declare_sequence_key

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

_EVENTS = "audit_events"


def upgrade() -> None:
    declare_sequence_key(_EVENTS, as_row_id=True)


def downgrade() -> None:
    declare_sequence_key(_EVENTS, as_row_id=False)
