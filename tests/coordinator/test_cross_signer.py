"""A signature speaks only for the identity of the key that verified it: the coordinator's
operator and a second agent whose key the auditor also holds cannot forge a receipt in
remote_risk's name, on any path that checks a proof bundle.

The forgery is the one issue 31 found from outside: a run of the demo (a real
remote_risk process) is proved; its Finding is rewritten, the receipt re-signed over it
by the second agent's key while ``iss`` still names remote_risk, the ledger re-logged and
its tree head signed with the coordinator's real key. ``audit verify --bundle`` (with
both agents' keys), ``POST /v1/audit/verify`` (the service's own anchors: every pinned
agent) and the stand-alone verifier all refuse it with ``receipt_issuer_mismatch``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.jwk import b64url_decode
from agent_cards.keys import SigningKey
from agent_cards.transparency.receipts import artifact_digest, issue_receipt
from agent_cards.transparency.statements import unverified_header
from contracts import strict_json
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import CORRELATION_FIELDS, AuditEvent
from coordinator.audit.proofs import prove_run
from coordinator.audit.receipts import compact, receipt_data, records_receipt
from coordinator.authority import identity
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from coordinator.workspace import Workspace
from tests.coordinator.test_audit_cli import anchors, cli, demo_dir, run_of  # noqa: F401

VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verifier" / "verify_bundle.py"
COLLUDER = SigningKey.generate("EdDSA")


def _with_colluder(demo: Path, into: Path) -> DataDir:
    """A copy of the demo's data directory in which a second agent is registered with
    its own pinned key (as `agents register` pins one)."""
    shutil.copytree(demo, into)
    data = DataDir(into)
    registry = Registry(data)
    (risk,) = [agent for agent in registry.agents() if agent.name == "remote-risk"]
    colluder = RegisteredAgent.model_validate(
        {
            **risk.model_dump(mode="json"),
            "name": "colluder",
            "pinned_jwks": {"keys": [COLLUDER.verification_key().to_jwk()]},
        }
    )
    registry._save(colluder)
    return data


def _forged(genuine: dict[str, Any], data: DataDir, path: Path) -> dict[str, Any]:
    """The Finding rewritten; the receipt re-signed by the colluder in remote_risk's name;
    re-logged; the head signed with the coordinator's real key."""
    (entry,) = genuine["artifacts"]
    artifacts = strict_json.loads(entry["content"])
    artifacts[0]["parts"] = [{"data": {"refund_execution_permitted": True}}]
    content = strict_json.dumps(artifacts).decode()
    ledger = Ledger(open_engine(f"sqlite+pysqlite:///{path}"))
    migrate(ledger.engine)
    for event in genuine["events"]:
        record = json.loads(event["canonical"])
        record["data"] = _rewritten(record, artifacts, content)
        fields = {name: record[name] for name in CORRELATION_FIELDS if name != "recorded_at"}
        ledger.append(AuditEvent(**fields, data=record["data"]))
    key = identity.coordinator_keys(data).active.private_key
    assert isinstance(key, Ed25519PrivateKey)
    remotes = [*genuine["jwks"]["keys"][1:], COLLUDER.verification_key().to_jwk()]
    bundle = prove_run(ledger, genuine["run_id"], key, remote_keys=remotes, artifacts=[content])
    result: dict[str, Any] = json.loads(json.dumps(bundle))
    return result


def _rewritten(record: dict[str, Any], artifacts: list[Any], content: str) -> dict[str, Any]:
    """The verdict's content hash rewritten, and the receipt re-signed wherever it is kept
    (in the verdict, or a ``handoff.receipt`` of its own)."""
    data: dict[str, Any] = dict(record["data"])
    if record["event_type"].startswith("artifact."):
        data["content_hash"] = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    if records_receipt(record["event_type"], data):
        jws = compact(data["receipt"])
        claims = strict_json.loads(b64url_decode(jws.split(".")[1]))
        assert unverified_header(jws)["kid"] != COLLUDER.kid
        claims["artifact_digest"] = artifact_digest(artifacts)
        data.update(receipt_data(issue_receipt(claims, COLLUDER)))
    return data


def test_a_receipt_re_signed_by_a_second_trusted_agent_is_refused_on_every_path(
    demo_dir: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """The insider plus a colluding agent: refused by `audit verify --bundle`, by the
    service's `POST /v1/audit/verify` check and by the stand-alone verifier alike."""
    data = _with_colluder(demo_dir, tmp_path / "data")
    genuine_path = tmp_path / "genuine.json"
    code, _ = cli(data.root, capsys, "audit", "prove", run_of(demo_dir, "ok"), "--output",
                  str(genuine_path))  # fmt: skip
    assert code == 0
    forged = _forged(json.loads(genuine_path.read_text()), data, tmp_path / "forged.db")
    forged_path = tmp_path / "forged.json"
    forged_path.write_text(json.dumps(forged))
    keys = anchors(data.root, capsys, tmp_path)
    # one anchor per registered agent: remote-risk, the colluder, the chain case's two
    assert sum(option == "--remote-key" for option in keys) == len(Registry(data).agents())

    code, out = cli(data.root, capsys, "audit", "verify", "--bundle", str(genuine_path), *keys)
    assert code == 0, out
    code, out = cli(data.root, capsys, "audit", "verify", "--bundle", str(forged_path), *keys)
    assert code == 1 and "receipt_issuer_mismatch" in out, out

    service = CoordinatorService(Workspace.resolve(data, None))
    assert service.audit_verify(json.loads(genuine_path.read_text())).ok
    assert service.audit_verify(forged).kind == "receipt_issuer_mismatch"

    completed = subprocess.run(
        [sys.executable, str(VERIFIER), str(forged_path), "--json", *keys],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    assert json.loads(completed.stdout)["reason"] == "receipt_issuer_mismatch"
