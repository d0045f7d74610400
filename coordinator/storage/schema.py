"""The tables, as SQLAlchemy Core objects.

The Alembic revisions own the real schema; these objects mirror it for queries, and a
test checks that the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from agent_cards.storage.schema import SEQUENCE_KEY, new_metadata

metadata = new_metadata()

# One row per ledger event. ``canonical`` is the RFC 8785 serialisation that ``hash``
# covers; the other columns repeat its fields so that they can be queried, and the
# verifier checks that they still agree with it.
audit_events = Table(
    "audit_events",
    metadata,
    Column("seq", SEQUENCE_KEY, primary_key=True, autoincrement=False),
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

# --- revision 0002: what a coordinator needs to survive a restart -------------------------

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(128), primary_key=True),
    Column("owner", String(256), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("authority", Text, nullable=False),
    Column("document", Text, nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("updated_at", String(32), nullable=False),
)

# One row per handoff attempt: the authoritative record, what was sent, and which
# coordinator process drives it until when (the lease row several replicas share).
handoffs = Table(
    "handoffs",
    metadata,
    Column("attempt_id", String(160), primary_key=True),
    Column("run_id", String(128), nullable=False),
    Column("handoff_id", String(128), nullable=False),
    Column("attempt", Integer, nullable=False),
    # 32 since revision 0003 (RETURNED_UNVERIFIED).
    Column("state", String(32), nullable=False),
    Column("version", Integer, nullable=False),
    Column("target", String(256), nullable=False),
    Column("remote_task_id", String(256), nullable=True),
    Column("record", Text, nullable=False),
    Column("payload", Text, nullable=True),
    Column("contract", String(16), nullable=False),
    Column("driver", String(128), nullable=True),
    Column("driver_until", Float, nullable=True),
    Column("updated_at", String(32), nullable=False),
    Index("ix_handoffs_run_id", "run_id"),
    Index("ix_handoffs_state", "state"),
)

artifacts = Table(
    "artifacts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(128), nullable=False),
    Column("attempt_id", String(160), nullable=False),
    Column("decision", String(32), nullable=False),
    Column("reason", Text, nullable=False),
    Column("content_hash", String(80), nullable=False),
    Column("size", Integer, nullable=False),
    Column("content", Text, nullable=True),
    Column("received_at", String(32), nullable=False),
    Index("ix_artifacts_run_id", "run_id"),
)

budget_units = Table(
    "budget_units",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(128), nullable=False),
    Column("attempt_id", String(160), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("actions", Integer, nullable=False),
    Column("context_units", Integer, nullable=False),
    Column("effects", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    # revision 0006: the federation's model requests and tokens (None: unknown).
    Column("model_requests", Integer, nullable=False, server_default="0"),
    Column("model_tokens", Integer, nullable=True),
    Index("ix_budget_units_run_id", "run_id"),
)

# Delegation grants: the claims digest and identifiers, never the token.
grants = Table(
    "grants",
    metadata,
    Column("jti", String(256), primary_key=True),
    Column("run_id", String(128), nullable=False),
    Column("attempt_id", String(160), nullable=False),
    Column("claims_digest", String(80), nullable=False),
    Column("scope", Text, nullable=False),
    Column("aud", Text, nullable=False),
    Column("exp", BigInteger, nullable=False),
)

card_versions = Table(
    "card_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("agent", String(256), nullable=False),
    Column("status", String(32), nullable=False),
    Column("card", Text, nullable=False),
    Column("card_digest", String(80), nullable=False),
    Column("verified_kid", String(160), nullable=True),
    Column("trust", String(32), nullable=False),
    Column("pinned_jwks", Text, nullable=False),
    Column("recorded_at", String(32), nullable=False),
    Index("ix_card_versions_agent", "agent"),
)

# --- revision 0004: signed tree heads ----------------------------------------------------

# Every tree head the coordinator signed over its own ledger (origin ``signed``), and the
# heads of other services' logs that it was shown and verified (origin ``witnessed``).
tree_heads = Table(
    "tree_heads",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("log_id", String(256), nullable=False),
    Column("origin", String(16), nullable=False),
    Column("tree_size", BigInteger, nullable=False),
    Column("root_hash", String(64), nullable=False),
    Column("issued_at", String(32), nullable=False),
    Column("kid", String(160), nullable=False),
    Column("jws", Text, nullable=False),
    Column("recorded_at", String(32), nullable=False),
    # revision 0007: who signed the head, the RFC 7638 thumbprint computed from the key
    # that verified it (ours for a signed head, the agent's pinned key for a witnessed
    # one): what witnessed heads are looked up by, never the log_id a head states.
    Column("signer", String(160), nullable=False),
    Index("ix_tree_heads_signer", "signer"),  # revision 0010: none on log_id, read by none
)

# --- revision 0005 -----------------------------------------------------------------------

# One row, rewritten by every readiness check: /healthz is ready only if this write commits.
health_probe = Table(
    "health_probe",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("probed_at", String(32), nullable=False),
    Column("prober", String(256), nullable=False),
)

# --- revision 0008 -----------------------------------------------------------------------

# A submission's Idempotency-Key (POST /v1/delegations, "wait": false), written in the
# transaction that creates its run: a retry of the same request finds that run
# (coordinator/storage/delegation_keys.py). Kept a day.
delegation_keys = Table(
    "delegation_keys",
    metadata,
    Column("idempotency_key", String(255), primary_key=True),
    Column("request_digest", String(80), nullable=False),
    Column("run_id", String(128), nullable=False),
    Column("attempt_id", String(160), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_delegation_keys_created_at", "created_at"),
)
