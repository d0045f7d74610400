"""remote_risk's tables, as SQLAlchemy Core objects.

The Alembic revisions in :mod:`member_kit.storage.migrations` own the real schema; these
objects mirror it for queries, and a test checks that the two agree. Every name starts
with ``remote_risk_`` so that the service can share a PostgreSQL database (or schema) with
the coordinator without a collision.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from agent_cards.storage.schema import SEQUENCE_KEY, new_metadata

VERSION_TABLE = "remote_risk_alembic_version"
TASK_SEQUENCE = "task_sequence"
TASK_COUNT = "task_count"

metadata = new_metadata()

# One row per task. Messages and artifacts are their A2A wire JSON; ``changed_at_ms`` is
# the status timestamp in epoch milliseconds and ``sequence`` breaks ties between equal
# timestamps (the sort key of ListTasks and its page tokens).
tasks = Table(
    "remote_risk_tasks",
    metadata,
    Column("id", String(128), nullable=False),
    Column("owner", String(2048), nullable=False),
    Column("context_id", Text, nullable=False),
    Column("state", String(64), nullable=False),
    Column("changed_at_ms", BigInteger, nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("status_message", Text, nullable=True),
    Column("history", Text, nullable=False),
    Column("artifacts", Text, nullable=False),
    Column("task_metadata", Text, nullable=True),
    Column("idempotency_key", String(512), nullable=True),
    # When the task's idempotency key expires (epoch ms); see member_kit.tasks.sql_keys.
    Column("key_expires_at_ms", BigInteger, nullable=True),
    # The replica working an unfinished task and until when (epoch ms); see tasks.leases.
    Column("worker", String(64), nullable=True),
    Column("lease_until_ms", BigInteger, nullable=True),
    PrimaryKeyConstraint("id", name="pk_remote_risk_tasks"),
    UniqueConstraint("owner", "idempotency_key", name="uq_remote_risk_tasks_idempotency"),
    Index("ix_remote_risk_tasks_owner_changed", "owner", "changed_at_ms", "sequence"),
    Index("ix_remote_risk_tasks_state_changed", "state", "changed_at_ms", "sequence"),
)

# Idempotency keys kept for the retention window after their task was evicted, with the
# task's final row (JSON) in ``retained_task``; while the task is stored its own row holds
# its key (on PostgreSQL, where replicas race for a key, the key's row is written first
# too). See member_kit.tasks.sql_keys.
idempotency_keys = Table(
    "remote_risk_idempotency_keys",
    metadata,
    Column("owner", String(2048), nullable=False),
    Column("idempotency_key", String(512), nullable=False),
    Column("task_id", String(128), nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
    Column("retained_task", Text, nullable=True),
    PrimaryKeyConstraint("owner", "idempotency_key", name="pk_remote_risk_idempotency_keys"),
    Index("ix_remote_risk_idempotency_keys_expires_at_ms", "expires_at_ms"),
)

# One row per delegation token that created a task, kept until it expires (plus leeway):
# the replay guard's claim, and while the member watches the token's grant for
# revocation, its claims as JSON (member_kit.trust.sql_replay, rr0011).
used_tokens = Table(
    "remote_risk_used_tokens",
    metadata,
    Column("issuer", String(1024), nullable=False),
    Column("jti", String(256), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("watched_claims", Text, nullable=True),
    PrimaryKeyConstraint("issuer", "jti", name="pk_remote_risk_used_tokens"),
    Index("ix_remote_risk_used_tokens_expires_at", "expires_at"),
)

# Named counters; ``task_sequence`` numbers status changes across restarts and replicas,
# ``task_count`` is how many tasks are stored (member_kit.tasks.sql_counters, rr0009).
counters = Table(
    "remote_risk_counters",
    metadata,
    Column("name", String(64), nullable=False),
    Column("value", BigInteger, nullable=False),
    PrimaryKeyConstraint("name", name="pk_remote_risk_counters"),
)

# The decision log (member_kit.audit.log): one row per entry, ``canonical`` its RFC 8785
# bytes and ``hash`` their SHA-256; leaf ``seq - 1`` of the log's Merkle tree is
# SHA-256(0x00 || hash). ``entry_key`` makes an entry recorded once (a task's receipt; a
# decision, written again after a write whose outcome was unknown).
audit_log = Table(
    "remote_risk_audit_log",
    metadata,
    Column("seq", SEQUENCE_KEY, nullable=False, autoincrement=False),
    Column("entry_key", String(512), nullable=True),
    Column("handoff_id", String(256), nullable=True),
    Column("hash", String(64), nullable=False),
    Column("canonical", Text, nullable=False),
    PrimaryKeyConstraint("seq", name="pk_remote_risk_audit_log"),
    UniqueConstraint("entry_key", name="uq_remote_risk_audit_log_entry_key"),
    Index("ix_remote_risk_audit_log_handoff_id", "handoff_id"),
)

# Signed tree heads of other logs this service was shown (the coordinator's, in tokens),
# each under its signer (rr0005): the RFC 7638 thumbprint of the pinned key that verified it.
witnessed_heads = Table(
    "remote_risk_witnessed_heads",
    metadata,
    Column("signer", String(128), nullable=False),
    Column("log_id", String(1024), nullable=False),
    Column("tree_size", BigInteger, nullable=False),
    Column("root_hash", String(64), nullable=False),
    Column("kid", String(128), nullable=False),
    Column("jws", Text, nullable=False),
    Column("recorded_at", String(32), nullable=False),
    PrimaryKeyConstraint(
        "signer", "log_id", "tree_size", "root_hash", name="pk_remote_risk_witnessed_heads"
    ),
)

# The guard's record of whose each upstream task is (member_kit.guard.tasks): the owner of
# the token that opened it, the metadata it was opened with (JSON), its idempotency key;
# ``seq`` orders them (newest last) so the oldest beyond capacity go first (rr0006).
guarded_tasks = Table(
    "remote_risk_guarded_tasks",
    metadata,
    Column("seq", Integer, nullable=False, autoincrement=True),
    Column("task_id", String(128), nullable=False),
    Column("owner", String(2048), nullable=False),
    Column("task_metadata", Text, nullable=False),
    Column("idempotency_key", String(512), nullable=True),
    PrimaryKeyConstraint("seq", name="pk_remote_risk_guarded_tasks"),
    UniqueConstraint("task_id", name="uq_remote_risk_guarded_tasks_task_id"),
    UniqueConstraint("owner", "idempotency_key", name="uq_remote_risk_guarded_tasks_key"),
)

# Revocation as the member learnt it (member_kit.trust.sql_replay, rr0007), so a
# restart forgets none of it: the revoked handoffs of each issuer, each kept until no
# token it could refuse is still valid (``keep_until``, epoch seconds) ...
revoked_handoffs = Table(
    "remote_risk_revoked_handoffs",
    metadata,
    Column("issuer", String(1024), nullable=False),
    Column("handoff_id", String(256), nullable=False),
    Column("keep_until", BigInteger, nullable=False),
    PrimaryKeyConstraint("issuer", "handoff_id", name="pk_remote_risk_revoked_handoffs"),
    Index("ix_remote_risk_revoked_handoffs_keep_until", "keep_until"),
)

# ... and the jti of each push applied, until the push expires (a replay is refused).
# The grants it watches are kept in their tokens' used-token rows (rr0011).
revocation_pushes = Table(
    "remote_risk_revocation_pushes",
    metadata,
    Column("issuer", String(1024), nullable=False),
    Column("jti", String(256), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("issuer", "jti", name="pk_remote_risk_revocation_pushes"),
    Index("ix_remote_risk_revocation_pushes_expires_at", "expires_at"),
)

# Each holder proof (RFC 9449 DPoP) taken, by its key's thumbprint and its jti, until no
# proof with it could be accepted any more (member_kit.trust.sql_replay, rr0007).
holder_proofs = Table(
    "remote_risk_holder_proofs",
    metadata,
    Column("jkt", String(128), nullable=False),
    Column("jti", String(256), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("jkt", "jti", name="pk_remote_risk_holder_proofs"),
    Index("ix_remote_risk_holder_proofs_expires_at", "expires_at"),
)

# The member whose database this is (member_kit.storage.owner, rr0008): its name, in one
# row written by the first process that opened it; its replicas share it, another member
# is refused.
database_member = Table(
    "remote_risk_database_member",
    metadata,
    Column("name", String(256), nullable=False),
    PrimaryKeyConstraint("name", name="pk_remote_risk_database_member"),
)
