"""A task's row holds when its idempotency key expires, so a send writes no key row.

The key's own row is written when its task is evicted (with the task's final form), not
when the task is opened: on SQLite a send then touches four B-trees fewer. Tasks stored
now take their key's expiry from its row; the rows stay (a lookup reads both).

Revision ID: rr0010
Revises: rr0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "rr0010"
down_revision: str | None = "rr0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("remote_risk_tasks") as batch:
        batch.add_column(sa.Column("key_expires_at_ms", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE remote_risk_tasks SET key_expires_at_ms = (SELECT k.expires_at_ms "
        "FROM remote_risk_idempotency_keys k WHERE k.owner = remote_risk_tasks.owner "
        "AND k.idempotency_key = remote_risk_tasks.idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )


def downgrade() -> None:
    # the keys of stored tasks back in their own table, as rr0009 keeps them
    op.execute(
        "INSERT INTO remote_risk_idempotency_keys (owner, idempotency_key, task_id, "
        "expires_at_ms) SELECT owner, idempotency_key, id, key_expires_at_ms "
        "FROM remote_risk_tasks t WHERE key_expires_at_ms IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM remote_risk_idempotency_keys k WHERE k.owner = t.owner "
        "AND k.idempotency_key = t.idempotency_key)"
    )
    with op.batch_alter_table("remote_risk_tasks") as batch:
        batch.drop_column("key_expires_at_ms")
