"""The audit ledger keeps one gapless hash chain and names the first place it was tampered with.

Every test runs on SQLite and on PostgreSQL (see ``conftest.py``). Tampering is done the way
an intruder with database access would do it: raw SQL on ``audit_events``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import jwt
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine, inspect, text

from coordinator.audit import ledger as ledger_module
from coordinator.audit.ledger import (
    GENESIS_HASH,
    HEAD_TYP,
    REDACTED,
    AuditEvent,
    Break,
    Ledger,
    canonical_bytes,
    export_bundle,
    public_jwk,
    record_hash,
    sign_head,
    thumbprint,
    verify,
    verify_bundle,
)
from coordinator.audit.log import chain as chain_module
from coordinator.errors import LedgerError
from coordinator.storage.migrations import current_revision, migrate
from coordinator.storage.schema import metadata
from tests.coordinator.conftest import EngineFactory

AT = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
TYPES = ("card.fetched", "grant.minted", "message.dispatched", "artifact.received")


def event(index: int, run_id: str = "run-a", **changes: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "event_type": TYPES[index % len(TYPES)],
        "actor": "coordinator",
        "run_id": run_id,
        "handoff_id": f"handoff-{index // 2}",
        "attempt": 1,
        "remote_task_id": f"task-{index}",
        "trace_id": f"{index:032x}",
        "recorded_at": AT,
        "data": {"index": index, "amount": 100, "target": "risk"},
    }
    return AuditEvent(**(values | changes))


def filled(engine: Engine, count: int = 6) -> Ledger:
    ledger = Ledger(engine)
    ledger.append_many(event(index) for index in range(count))
    return ledger


def sql(engine: Engine, statement: str, **params: Any) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), params)


def hash_of(engine: Engine, seq: int) -> str:
    with engine.connect() as connection:
        query = text("SELECT hash FROM audit_events WHERE seq = :seq")
        return str(connection.execute(query, {"seq": seq}).scalar_one())


def broken_at(engine: Engine, seq: int, kind: Break) -> None:
    report = verify(engine)
    assert not report.ok
    assert (report.seq, report.kind) == (seq, kind), str(report)


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


# --- appending and reading ------------------------------------------------------------


def test_appended_events_form_a_chain_that_verifies(engine: Engine) -> None:
    """Appended events get seq 1..n, link to the previous hash from genesis, and verify."""
    ledger = filled(engine, 5)
    ledger.append(event(5, run_id="run-b"))
    stored = ledger.events()
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5, 6]
    assert stored[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in pairwise(stored))
    assert ledger.head() == (6, stored[-1].hash)
    assert [e.seq for e in ledger.events("run-b")] == [6]
    report = verify(engine)
    assert report.ok and report.checked == 6 and report.last_hash == stored[-1].hash


def test_event_hash_is_sha256_of_rfc8785_record(engine: Engine) -> None:
    """An event's hash is SHA-256 over the RFC 8785 JSON of its fields, seq and prev_hash."""
    stored = filled(engine, 1).events()[0]
    record = {
        "seq": 1,
        "prev_hash": GENESIS_HASH,
        "event_type": stored.event_type,
        "recorded_at": "2025-05-01T12:00:00.000000Z",
        "run_id": "run-a",
        "handoff_id": "handoff-0",
        "attempt": 1,
        "actor": "coordinator",
        "remote_task_id": "task-0",
        "trace_id": "0" * 32,
        "data": {"index": 0, "amount": 100, "target": "risk"},
    }
    assert stored.hash == hashlib.sha256(canonical_bytes(record)).hexdigest()
    assert stored.recorded_at == AT


def test_empty_ledger_verifies_and_has_genesis_head(engine: Engine) -> None:
    """An empty ledger verifies and its head is (0, 64 zeros)."""
    assert Ledger(engine).head() == (0, GENESIS_HASH)
    assert verify(engine).ok


def test_events_that_cannot_be_hashed_are_refused(engine: Engine) -> None:
    """A naive timestamp or an integer beyond JSON's safe range is refused with event_invalid."""
    ledger = Ledger(engine)
    with pytest.raises(LedgerError) as naive:
        ledger.append(event(0, recorded_at=datetime(2025, 1, 1)))
    with pytest.raises(LedgerError) as huge:
        ledger.append(event(0, data={"n": 2**60}))
    assert naive.value.reason == huge.value.reason == "event_invalid"
    assert ledger.head() == (0, GENESIS_HASH)


def test_redaction_removes_credentials_before_hashing(engine: Engine) -> None:
    """Keys named like credentials and bearer-shaped values never reach the database."""
    ledger = Ledger(engine)
    data = {
        "Authorization": "Bearer sk-live-123",
        "nested": {"access_token": "tok-456", "items": [{"client_secret": "s-789"}]},
        "note": "bearer tok-abc",
        "grant": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln",
        "skill": "risk.assess",
    }
    stored = ledger.append(event(0, data=data))
    assert stored.data == {
        "Authorization": REDACTED,
        "nested": {"access_token": REDACTED, "items": [{"client_secret": REDACTED}]},
        "note": REDACTED,
        "grant": REDACTED,
        "skill": "risk.assess",
    }
    with engine.connect() as connection:
        raw = str(connection.execute(text("SELECT canonical FROM audit_events")).scalar_one())
    assert not any(secret in raw for secret in ("sk-live", "tok-456", "s-789", "tok-abc", "eyJ"))
    assert verify(engine).ok


# --- tampering with raw SQL -----------------------------------------------------------


def test_edited_data_is_a_hash_mismatch(engine: Engine) -> None:
    """Changing an event's data in the database is reported as hash_mismatch at that event."""
    filled(engine)
    sql(
        engine,
        "UPDATE audit_events SET canonical = replace(canonical, :old, :new) WHERE seq = 3",
        old='"amount":100',
        new='"amount":1',
    )
    broken_at(engine, 3, Break.HASH_MISMATCH)


def test_edited_type_is_a_hash_mismatch(engine: Engine) -> None:
    """Changing an event's type column is reported as hash_mismatch at that event."""
    filled(engine)
    sql(engine, "UPDATE audit_events SET event_type = 'artifact.admitted' WHERE seq = 4")
    broken_at(engine, 4, Break.HASH_MISMATCH)
    assert "event_type" in verify(engine).detail


def test_edited_hash_column_is_detected(engine: Engine) -> None:
    """Overwriting a stored hash is reported as hash_mismatch at that event."""
    filled(engine)
    sql(engine, "UPDATE audit_events SET hash = :h WHERE seq = 2", h="f" * 64)
    broken_at(engine, 2, Break.HASH_MISMATCH)


def test_deleted_middle_event_is_a_sequence_gap(engine: Engine) -> None:
    """Deleting a middle event is reported as sequence_gap at the missing number."""
    filled(engine)
    sql(engine, "DELETE FROM audit_events WHERE seq = 3")
    broken_at(engine, 3, Break.SEQUENCE_GAP)


def test_deletion_hidden_by_renumbering_is_a_prev_mismatch(engine: Engine) -> None:
    """Deleting an event and renumbering the rest is reported as prev_mismatch where it was."""
    filled(engine)
    sql(engine, "DELETE FROM audit_events WHERE seq = 3")
    sql(engine, "UPDATE audit_events SET seq = -seq WHERE seq > 3")
    sql(engine, "UPDATE audit_events SET seq = -seq - 1 WHERE seq < 0")
    broken_at(engine, 3, Break.PREV_MISMATCH)


def test_deleted_last_event_needs_a_signed_head(engine: Engine, key: Ed25519PrivateKey) -> None:
    """Truncation leaves a valid shorter chain: only a head signed earlier reveals it."""
    ledger = filled(engine)
    head = sign_head(ledger, key)
    sql(engine, "DELETE FROM audit_events WHERE seq = 6")
    assert verify(engine).ok  # the chain alone cannot tell that its end is missing
    report = verify(engine, head=head["jws"], public_key=key.public_key())
    assert (report.ok, report.seq, report.kind) == (False, 6, Break.TRUNCATED)


def test_signed_head_accepts_later_appends_and_refuses_other_keys(
    engine: Engine, key: Ed25519PrivateKey
) -> None:
    """A head stays valid as the chain grows; a head checked with another key is refused."""
    ledger = filled(engine)
    head = sign_head(ledger, key)
    ledger.append(event(7))
    assert verify(engine, head=head["jws"], public_key=public_jwk(key)).ok
    other = Ed25519PrivateKey.generate().public_key()
    assert verify(engine, head=head["jws"], public_key=other).kind == Break.HEAD_INVALID
    header = jwt.get_unverified_header(head["jws"])
    assert header == {"alg": "EdDSA", "typ": HEAD_TYP, "kid": thumbprint(public_jwk(key))}
    assert (head["seq"], head["hash"]) == (6, hash_of(engine, 6))


def test_rewritten_history_under_a_signed_head_is_a_head_mismatch(
    engine: Engine, key: Ed25519PrivateKey
) -> None:
    """Replacing the signed last event with a well-formed forgery is caught by the head."""
    ledger = filled(engine)
    head = sign_head(ledger, key)
    forged = {**json.loads(_canonical(engine, 6)), "data": {"amount": 1}}
    body = canonical_bytes(forged).decode()
    sql(
        engine,
        "UPDATE audit_events SET canonical = :c, hash = :h WHERE seq = 6",
        c=body,
        h=record_hash(forged),
    )
    assert verify(engine).ok
    report = verify(engine, head=head["jws"], public_key=key.public_key())
    assert (report.seq, report.kind) == (6, Break.HEAD_MISMATCH)


def _canonical(engine: Engine, seq: int) -> str:
    with engine.connect() as connection:
        query = text("SELECT canonical FROM audit_events WHERE seq = :seq")
        return str(connection.execute(query, {"seq": seq}).scalar_one())


def test_inserted_forged_event_breaks_the_next_link(engine: Engine) -> None:
    """A well-formed forgery inserted after event 3 is reported as prev_mismatch at event 5."""
    filled(engine)
    sql(engine, "UPDATE audit_events SET seq = -seq WHERE seq > 3")
    sql(engine, "UPDATE audit_events SET seq = -seq + 1 WHERE seq < 0")
    record = {
        **json.loads(_canonical(engine, 3)),
        "seq": 4,
        "prev_hash": hash_of(engine, 3),
        "event_type": "artifact.admitted",
        "data": {"verdict": "accept"},
    }
    columns = {name: record[name] for name in ledger_module.CORRELATION_FIELDS}
    sql(
        engine,
        "INSERT INTO audit_events (seq, prev_hash, hash, canonical, event_type, recorded_at,"
        " run_id, handoff_id, attempt, actor, remote_task_id, trace_id) VALUES (:seq, :prev,"
        " :hash, :canonical, :event_type, :recorded_at, :run_id, :handoff_id, :attempt,"
        " :actor, :remote_task_id, :trace_id)",
        seq=4,
        prev=record["prev_hash"],
        hash=record_hash(record),
        canonical=canonical_bytes(record).decode(),
        **columns,
    )
    broken_at(engine, 5, Break.PREV_MISMATCH)


def test_swapped_events_are_a_prev_mismatch(engine: Engine) -> None:
    """Swapping two events' sequence numbers is reported as prev_mismatch at the first of them."""
    filled(engine)
    sql(engine, "UPDATE audit_events SET seq = -1 WHERE seq = 2")
    sql(engine, "UPDATE audit_events SET seq = 2 WHERE seq = 4")
    sql(engine, "UPDATE audit_events SET seq = 4 WHERE seq = -1")
    broken_at(engine, 2, Break.PREV_MISMATCH)


def test_strict_mode_refuses_a_non_canonical_record(engine: Engine) -> None:
    """A rehashed last record that is not RFC 8785 passes the fast walk but not strict mode."""
    filled(engine)
    body = _canonical(engine, 6).replace('{"actor"', '{ "actor"')
    digest = hashlib.sha256(body.encode()).hexdigest()
    sql(engine, "UPDATE audit_events SET canonical = :c, hash = :h WHERE seq = 6", c=body, h=digest)
    assert verify(engine).ok
    report = verify(engine, strict=True)
    assert (report.seq, report.kind) == (6, Break.NOT_CANONICAL)


# --- concurrency ----------------------------------------------------------------------


def _append_concurrently(ledgers: list[Ledger], per_writer: int) -> None:
    errors: list[BaseException] = []

    def write(ledger: Ledger, writer: int) -> None:
        try:
            for index in range(per_writer):
                ledger.append(event(index, run_id=f"run-{writer}"))
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(ledger, writer))
        for writer, ledger in enumerate(ledgers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_concurrent_appends_keep_one_gapless_chain(engine: Engine) -> None:
    """Appends from several threads sharing an engine yield one gapless chain that verifies."""
    ledger = Ledger(engine)
    _append_concurrently([ledger] * 4, per_writer=15)
    assert [e.seq for e in ledger.events()] == list(range(1, 61))
    assert verify(engine).ok


def test_concurrent_appends_from_separate_engines(
    engine: Engine, engine_factory: EngineFactory
) -> None:
    """Two engines (as two processes would have) appending at once keep one valid chain."""
    ledgers = [Ledger(engine), Ledger(engine_factory()), Ledger(engine_factory())]
    _append_concurrently(ledgers, per_writer=15)
    assert Ledger(engine).head()[0] == 45
    assert verify(engine).ok


def test_writer_with_a_stale_head_fails_loudly(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that lost the race (stale head) gets chain_conflict and the chain does not fork."""
    ledger = filled(engine, 2)
    monkeypatch.setattr(chain_module, "_head", lambda connection: (1, hash_of(engine, 1)))
    with pytest.raises(LedgerError) as caught:
        ledger.append(event(9))
    assert caught.value.reason == "chain_conflict"
    monkeypatch.undo()
    assert ledger.head()[0] == 2 and verify(engine).ok


# --- bundles --------------------------------------------------------------------------


@pytest.fixture
def bundle(engine: Engine, key: Ed25519PrivateKey) -> dict[str, Any]:
    ledger = Ledger(engine)
    for index in range(8):
        run_id = "run-a" if index % 3 == 0 else "run-b"
        ledger.append(event(index, run_id=run_id, data={"index": index, "run": run_id}))
    exported = export_bundle(ledger, "run-a", key)
    result: dict[str, Any] = json.loads(json.dumps(exported))
    return result


def test_bundle_verifies_offline(bundle: dict[str, Any], key: Ed25519PrivateKey) -> None:
    """An exported bundle verifies against the trusted key and discloses no other run's data."""
    report = verify_bundle(bundle, trusted_public_jwk=public_jwk(key))
    assert report.ok and report.last_seq == 8, str(report)
    assert [e["seq"] for e in bundle["events"]] == [1, 4, 7]
    assert '"run-b"' not in json.dumps(bundle["events"])
    assert "d" not in bundle["public_jwk"]


def test_bundle_with_edited_event_is_refused(bundle: dict[str, Any]) -> None:
    """Editing an event in a bundle is reported as hash_mismatch at that event."""
    bundle["events"][1]["data"]["index"] = 40
    report = verify_bundle(bundle)
    assert (report.ok, report.seq, report.kind) == (False, 4, Break.HASH_MISMATCH)


def test_bundle_with_consistently_rewritten_event_is_refused(bundle: dict[str, Any]) -> None:
    """An edit with recomputed hashes and relinked skeleton still fails the signed attestation."""
    document = bundle["events"][1]
    document["data"]["index"] = 40
    record = {name: value for name, value in document.items() if name != "hash"}
    document["hash"] = record_hash(record)
    bundle["chain"][3][2] = document["hash"]
    bundle["chain"][4][1] = document["hash"]
    report = verify_bundle(bundle)
    assert (report.ok, report.kind) == (False, Break.ATTESTATION_INVALID)


def test_bundle_skeleton_tampering_is_refused(bundle: dict[str, Any]) -> None:
    """Dropping a skeleton entry is reported as a sequence gap."""
    del bundle["chain"][2]
    report = verify_bundle(bundle)
    assert (report.ok, report.seq, report.kind) == (False, 3, Break.SEQUENCE_GAP)


def test_bundle_signed_by_an_untrusted_key_is_refused(bundle: dict[str, Any]) -> None:
    """A bundle re-signed by another key is refused when the trusted key is given."""
    forged = copy.deepcopy(bundle)
    other = Ed25519PrivateKey.generate()
    forged["public_jwk"] = public_jwk(other)
    report = verify_bundle(forged, trusted_public_jwk=bundle["public_jwk"])
    assert (report.ok, report.kind) == (False, Break.UNTRUSTED_KEY)
    assert verify_bundle(forged).kind == Break.HEAD_INVALID


# --- migrations -----------------------------------------------------------------------


def test_on_sqlite_an_event_s_seq_is_its_row_id_and_the_migration_keeps_the_chain(
    engine_factory: EngineFactory,
) -> None:
    """0009: on SQLite the events' ``seq`` is the row id, with no B-tree of its own beside
    the table's (one page less a commit); the table built again keeps every event, the
    chain verifies and goes on. On PostgreSQL the revision changes nothing."""
    engine = engine_factory()
    migrate(engine, "0008")
    filled(engine, 4)
    query = "SELECT seq, prev_hash, hash, canonical FROM audit_events ORDER BY seq"
    with engine.connect() as connection:
        before = connection.execute(text(query)).all()
    migrate(engine)
    with engine.connect() as connection:
        assert connection.execute(text(query)).all() == before
        if engine.dialect.name == "sqlite":
            structures = connection.execute(
                text("SELECT name FROM sqlite_master WHERE tbl_name = 'audit_events'")
            )
            assert {name for (name,) in structures} == {"audit_events", "ix_audit_events_run_id"}
            pairs = connection.execute(text("SELECT rowid, seq FROM audit_events")).all()
            assert all(rowid == seq for rowid, seq in pairs) and len(pairs) == 4
    Ledger(engine).append_many(event(index) for index in range(4, 6))
    assert verify(engine).checked == 6


def test_tree_heads_are_indexed_by_their_signer_alone(engine_factory: EngineFactory) -> None:
    """0010: heads are read by origin and verified signer, never by the log_id a head
    states, so that column has no index to write with every witnessed head."""
    engine = engine_factory()
    migrate(engine)
    names = {index["name"] for index in inspect(engine).get_indexes("tree_heads")}
    assert names == {"ix_tree_heads_signer"}


def test_migrations_apply_on_an_empty_database_and_are_idempotent(
    engine_factory: EngineFactory,
) -> None:
    """migrate() creates the schema on an empty database and a second run changes nothing."""
    engine = engine_factory()
    assert current_revision(engine) is None
    migrate(engine)
    migrate(engine)
    assert current_revision(engine) == "0010"
    assert "audit_events" in inspect(engine).get_table_names()
    filled(engine, 2)
    migrate(engine)
    assert verify(engine).checked == 2


def test_schema_module_matches_the_migrations(engine: Engine) -> None:
    """The Core tables in schema.py describe exactly what the revisions create."""
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert differences == []
