"""Proof bundles for outsiders, signed tree heads, and forks caught by consistency.

Every ledger test runs on SQLite and on PostgreSQL (see ``conftest.py``). Tampering with
the database is done with raw SQL. The stand-alone verifier
(docs/verifier/verify_bundle.py) runs as a subprocess, as an auditor would run it, on
consistency documents here; test_bundle_anchors.py checks bundles with both verifiers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import ECAlgorithm
from sqlalchemy import Engine, text

from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import AuditEvent
from coordinator.audit.log.signing import public_jwk, thumbprint
from coordinator.audit.log.tree_heads import (
    TreeHeadStore,
    sign_tree_head,
    verify_tree_head,
)
from coordinator.audit.log.verification import Break, verify
from coordinator.audit.proofs import prove_consistency, prove_run, sign_current_head
from coordinator.audit.receipts import receipt_event
from coordinator.errors import LedgerError
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate

AT = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verifier" / "verify_bundle.py"


def event(index: int, run_id: str = "run-a", **changes: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "event_type": "message.dispatched",
        "actor": "coordinator",
        "run_id": run_id,
        "handoff_id": f"handoff-{index // 2}",
        "attempt": 1,
        "recorded_at": AT,
        "data": {"index": index},
    }
    return AuditEvent(**(values | changes))


def sql(engine: Engine, statement: str, **params: Any) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), params)


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def remote_jwk() -> tuple[Any, dict[str, Any]]:
    """A remote's ES256 card key and its public JWK (kid as the card publishes it)."""
    private = generate_private_key(SECP256R1())
    jwk = {**ECAlgorithm.to_jwk(private.public_key(), as_dict=True), "kid": "risk-card-1"}
    return private, jwk


def receipt(private: Any, handoff_id: str, attempt: int = 1) -> str:
    claims = {"handoff_id": handoff_id, "attempt": attempt, "state": "TASK_STATE_COMPLETED"}
    return jwt.encode(claims, private, algorithm="ES256", headers={"kid": "risk-card-1"})


def filled(engine: Engine, remote: tuple[Any, dict[str, Any]]) -> Ledger:
    """Ten events of two runs; run-a has a minted grant and a remote's receipt."""
    ledger = Ledger(engine)
    for index in range(10):
        run_id = "run-a" if index % 3 == 0 else "run-b"
        if index == 3:
            data = {"jti": "jti-1", "claims_digest": "sha-256:" + "ab" * 32, "scope": "risk"}
            ledger.append(event(index, run_id, event_type="grant.minted", data=data))
        elif index == 6:
            signed = receipt(remote[0], "handoff-3")
            ledger.append(
                receipt_event(
                    signed, actor="coordinator", run_id="run-a", handoff_id="handoff-3", attempt=1
                )
            )
        else:
            ledger.append(event(index, run_id))
    return ledger


def standalone_consistency(
    document: dict[str, Any], tmp_path: Path, trusted: dict[str, Any]
) -> dict[str, Any]:
    """The stand-alone verifier's verdict on an `audit consistency --json` document."""
    (tmp_path / "consistency.json").write_text(json.dumps(document))
    (tmp_path / "trusted.json").write_text(json.dumps(trusted))
    args = [str(tmp_path / "consistency.json"), "--consistency", "--json"]
    args += ["--trusted-jwk", str(tmp_path / "trusted.json")]
    completed = subprocess.run(
        [sys.executable, str(VERIFIER), *args], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode in (0, 1), completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def test_prove_refuses_to_vouch_for_a_tampered_ledger(
    engine: Engine, key: Ed25519PrivateKey, remote_jwk: tuple[Any, dict[str, Any]]
) -> None:
    """`prove` verifies the ledger before it signs: an edited event means no head."""
    filled(engine, remote_jwk)
    sql(
        engine,
        "UPDATE audit_events SET canonical = replace(canonical, 'index', 'idx') WHERE seq = 2",
    )
    with pytest.raises(LedgerError) as caught:
        prove_run(Ledger(engine), "run-a", key)
    assert caught.value.reason == "ledger_broken"
    assert TreeHeadStore(engine).signed() == []


# --- kept heads and audit verify ----------------------------------------------------------


def test_verify_checks_every_kept_tree_head(
    engine: Engine, key: Ed25519PrivateKey, remote_jwk: tuple[Any, dict[str, Any]]
) -> None:
    """Heads signed at 10 and 12 both match the walked tree; verify counts them."""
    ledger = filled(engine, remote_jwk)
    sign_current_head(ledger, key)
    ledger.append_many([event(10), event(11)])
    sign_current_head(ledger, key)
    report = verify(engine, keys={"keys": [public_jwk(key)]})
    assert report.ok and report.tree_heads == 2, str(report)
    latest = TreeHeadStore(engine).latest_signed()
    assert latest is not None and report.root_hash == latest.root_hash


def test_truncation_under_a_kept_head_is_caught(
    engine: Engine, key: Ed25519PrivateKey, remote_jwk: tuple[Any, dict[str, Any]]
) -> None:
    """Cutting the last events leaves a valid chain, but not under the kept tree head."""
    ledger = filled(engine, remote_jwk)
    sign_current_head(ledger, key)
    sql(engine, "DELETE FROM audit_events WHERE seq >= 9")
    report = verify(engine)
    assert (report.ok, report.seq, report.kind) == (False, 9, Break.TRUNCATED)


def test_rewritten_last_event_is_a_root_mismatch(
    engine: Engine, key: Ed25519PrivateKey, remote_jwk: tuple[Any, dict[str, Any]]
) -> None:
    """A well-formed forgery of the last event passes the chain, not the kept tree head."""
    from coordinator.audit.log.events import canonical_bytes, record_hash

    ledger = filled(engine, remote_jwk)
    sign_current_head(ledger, key)
    with engine.connect() as connection:
        body = connection.execute(text("SELECT canonical FROM audit_events WHERE seq = 10"))
        forged = {**json.loads(body.scalar_one()), "data": {"index": 0}}
    sql(
        engine,
        "UPDATE audit_events SET canonical = :c, hash = :h WHERE seq = 10",
        c=canonical_bytes(forged).decode(),
        h=record_hash(forged),
    )
    report = verify(engine)
    assert (report.ok, report.seq, report.kind) == (False, 10, Break.ROOT_MISMATCH)


def test_an_edited_kept_head_is_caught(
    engine: Engine, key: Ed25519PrivateKey, remote_jwk: tuple[Any, dict[str, Any]]
) -> None:
    """Editing a kept head's root column (to hide a rewrite) disagrees with its JWS."""
    ledger = filled(engine, remote_jwk)
    sign_current_head(ledger, key)
    sql(engine, "UPDATE tree_heads SET root_hash = :r", r="ab" * 32)
    report = verify(engine, keys={"keys": [public_jwk(key)]})
    assert (report.ok, report.kind) == (False, Break.HEAD_INVALID)


# --- forks --------------------------------------------------------------------------------


def test_a_forked_log_is_caught_by_consistency_with_a_witnessed_head(
    engine: Engine, key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    """Same key, same size, another last event: a witness's kept head exposes the fork,
    at the same size and after the forked log has grown; the honest log extends it."""
    fork_engine = open_engine(str(tmp_path / "fork"))
    migrate(fork_engine)
    honest, forked = Ledger(engine), Ledger(fork_engine)
    for ledger in (honest, forked):
        ledger.append_many(event(index) for index in range(9))
    honest.append(event(9))
    forked.append(event(9, data={"index": 9, "verdict": "rewritten"}))
    witnessed = sign_current_head(honest, key)
    fork_head = sign_current_head(forked, key)
    assert fork_head.tree_size == witnessed.tree_size == 10
    assert fork_head.root_hash != witnessed.root_hash
    same_size = prove_consistency(forked, witnessed, fork_head)
    assert (same_size["consistent"], same_size["reason"]) == (False, "inconsistent")
    on_honest = prove_consistency(honest, fork_head, witnessed)
    assert (on_honest["consistent"], on_honest["reason"]) == (False, "inconsistent")
    forked.append_many([event(10), event(11)])
    later = prove_consistency(forked, witnessed, sign_current_head(forked, key))
    assert (later["consistent"], later["reason"]) == (False, "inconsistent")
    honest.append_many([event(10), event(11)])
    extends = prove_consistency(honest, witnessed, sign_current_head(honest, key))
    assert extends["consistent"] and len(extends["proof"]) > 0
    fork_engine.dispose()
    for document in (same_size, on_honest, later, extends):
        theirs = standalone_consistency(document, tmp_path, public_jwk(key))
        assert (theirs["ok"], theirs["reason"]) == (document["consistent"], document["reason"])


def test_witnessed_heads_of_another_log_are_kept_apart(engine: Engine) -> None:
    """A remote's head, verified with its key, is kept as witnessed, not as one of ours,
    and found by the thumbprint of the key that verified it, not by the log it names."""
    remote_key = Ed25519PrivateKey.generate()
    head = sign_tree_head(3, b"\x11" * 32, remote_key, issuer="remote-risk", now=AT)
    store = TreeHeadStore(engine)
    signer = thumbprint(public_jwk(remote_key))
    store.witness(verify_tree_head(head.jws, public_jwk(remote_key)), signer)
    assert [h.root_hash for h in store.witnessed({signer})] == ["11" * 32]
    assert store.witnessed({"another-signer"}) == []
    assert store.signed() == []
    assert verify(engine).ok


def test_heads_across_chunk_boundaries_are_checked(engine: Engine, key: Ed25519PrivateKey) -> None:
    """With more events than one verification batch, kept heads at unaligned sizes match,
    and a kept head whose root is wrong is named at its size."""
    ledger = Ledger(engine)
    ledger.append_many(event(index) for index in range(4097))
    sign_current_head(ledger, key)
    ledger.append_many(event(index) for index in range(4097, 5000))
    sign_current_head(ledger, key)
    assert verify(engine).tree_heads == 2
    wrong = sign_tree_head(4500, b"\x22" * 32, key)
    TreeHeadStore(engine).keep(wrong)
    report = verify(engine, keys={"keys": [public_jwk(key)]})
    assert (report.ok, report.seq, report.kind) == (False, 4500, Break.ROOT_MISMATCH)
