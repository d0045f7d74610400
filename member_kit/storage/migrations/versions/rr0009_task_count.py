"""How many tasks are stored, kept as a counter (member_kit.tasks.sql_counters).

Revision ID: rr0009
Revises: rr0008
"""

from __future__ import annotations

from alembic import op

revision: str = "rr0009"
down_revision: str | None = "rr0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute(
        "INSERT INTO remote_risk_counters (name, value) "
        "SELECT 'task_count', count(*) FROM remote_risk_tasks"
    )


def downgrade() -> None:
    op.execute("DELETE FROM remote_risk_counters WHERE name = 'task_count'")
