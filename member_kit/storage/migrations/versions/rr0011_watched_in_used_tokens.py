"""A watched grant is kept in its token's used-token row, not in a table of its own.

Every token that creates a task is claimed (its used-token row) and watched (its grant
kept for a restarted process to cancel its tasks), both until the token expires, in the
same transaction. Kept in one row, a send on SQLite writes three B-trees fewer (the
watched grants' table, its key and its expiry index). The index on the key rows'
``task_id`` goes too: no query has read it since rr0010.

Revision ID: rr0011
Revises: rr0010
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "rr0011"
down_revision: str | None = "rr0010"
branch_labels: str | None = None
depends_on: str | None = None

_USED, _WATCHED = "remote_risk_used_tokens", "remote_risk_watched_grants"
_KEYS_TASK_INDEX = "ix_remote_risk_idempotency_keys_task_id"


def upgrade() -> None:
    with op.batch_alter_table(_USED) as batch:
        batch.add_column(sa.Column("watched_claims", sa.Text(), nullable=True))
    connection = op.get_bind()
    watched = connection.execute(sa.text(f"SELECT jti, forget_at, claims FROM {_WATCHED}"))
    for jti, forget_at, claims in watched.fetchall():
        row = {"issuer": json.loads(claims)["iss"], "jti": jti, "at": forget_at, "claims": claims}
        connection.execute(
            sa.text(
                f"INSERT INTO {_USED} (issuer, jti, expires_at, watched_claims) "
                "VALUES (:issuer, :jti, :at, :claims) ON CONFLICT (issuer, jti) "
                "DO UPDATE SET watched_claims = excluded.watched_claims"
            ),
            row,
        )
    op.drop_table(_WATCHED)
    op.drop_index(_KEYS_TASK_INDEX, table_name="remote_risk_idempotency_keys")


def downgrade() -> None:
    op.create_index(_KEYS_TASK_INDEX, "remote_risk_idempotency_keys", ["task_id"])
    op.create_table(
        _WATCHED,
        sa.Column("jti", sa.String(256), nullable=False),
        sa.Column("forget_at", sa.BigInteger(), nullable=False),
        sa.Column("claims", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("jti", name="pk_remote_risk_watched_grants"),
    )
    op.create_index("ix_remote_risk_watched_grants_forget_at", _WATCHED, ["forget_at"])
    op.execute(
        f"INSERT INTO {_WATCHED} (jti, forget_at, claims) SELECT jti, expires_at, "
        f"watched_claims FROM {_USED} WHERE watched_claims IS NOT NULL"
    )
    with op.batch_alter_table(_USED) as batch:
        batch.drop_column("watched_claims")
