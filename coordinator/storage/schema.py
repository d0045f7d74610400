"""The tables, as SQLAlchemy Core objects.

The Alembic revisions own the real schema; these objects mirror it for queries, and a
test checks that the two agree.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# One row per ledger event. ``canonical`` is the RFC 8785 serialisation that ``hash``
# covers; the other columns repeat its fields so that they can be queried, and the
# verifier checks that they still agree with it.
audit_events = Table(
    "audit_events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("recorded_at", String(32), nullable=False),
    Column("run_id", String(128), nullable=True),
    Column("handoff_id", String(128), nullable=True),
    Column("attempt", Integer, nullable=True),
    Column("actor", String(256), nullable=False),
    Column("remote_task_id", String(256), nullable=True),
    Column("trace_id", String(64), nullable=True),
    Column("canonical", Text, nullable=False),
    Index("ix_audit_events_run_id", "run_id"),
)
