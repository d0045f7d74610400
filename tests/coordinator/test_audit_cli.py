"""The demo's cross-service facts land in the ledger, and the audit commands read them back."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, load_or_create
from agent_cards.transparency.receipts import artifact_digest, issue_receipt
from agent_cards.transparency.succession import sign_succession
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import CORRELATION_FIELDS, AuditEvent
from coordinator.audit.proofs import prove_run
from coordinator.audit.receipts import receipt_event
from coordinator.cli.main import main
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from coordinator.workspace import Workspace


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory in which `federation demo --case all` ran once."""
    data = tmp_path_factory.mktemp("audit")
    env = {**os.environ, "FEDERATION_DATA_DIR": str(data)}
    completed = subprocess.run(
        [sys.executable, "-m", "coordinator", "demo", "--case", "all", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr
    (data / "demo.json").write_text(completed.stdout)
    return data


def cli(data: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["--data-dir", str(data), *args])
    return code, capsys.readouterr().out


def run_of(data: Path, case: str) -> str:
    document = json.loads((data / "demo.json").read_text())
    return next(c["run_id"] for c in document["cases"] if c["case"] == case)


def test_demo_ledger_verifies(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`audit verify` checks the whole chain the demo wrote and says it is intact."""
    code, out = cli(demo_dir, capsys, "audit", "verify")
    assert code == 0 and out.startswith("ledger: ok")


def test_audit_show_rebuilds_the_handoff_case(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the ledger alone: owner privacy, three accepted branches, a grant, the disposition."""
    code, out = cli(demo_dir, capsys, "audit", "show", run_of(demo_dir, "handoff"), "--json")
    view = json.loads(out)
    assert code == 0
    assert view["owner"] == "privacy" and view["ownership_path"] == ["coordinator", "privacy"]
    assert [b["state"] for b in view["branches"]] == ["ACCEPTED"] * 3
    remote = [b for b in view["branches"] if b["remote_task_id"]]
    assert len(remote) == 1 and remote[0]["remote_state"] == "TASK_STATE_COMPLETED"
    assert len(view["grants"]) == 1 and view["grants"][0]["scope"] == "risk:interpret"
    assert view["artifacts"][0]["decision"] == "admitted"
    assert view["disposition"]["status"] == "needs_review"
    assert view["effects"] == 0 and view["live_branches"] == []


def test_audit_show_matches_run_show(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ledger's account of a run agrees with the run record on owner and branch states."""
    run_id = run_of(demo_dir, "failure")
    _, from_ledger = cli(demo_dir, capsys, "audit", "show", run_id, "--json")
    _, from_record = cli(demo_dir, capsys, "run", "show", run_id, "--json")
    ledger_view, record_view = json.loads(from_ledger), json.loads(from_record)
    assert ledger_view["owner"] == record_view["owner"]
    states = {b["branch"]: b["state"] for b in record_view["branches"]}
    assert {b["branch"]: b["state"] for b in ledger_view["branches"]} == states


def test_export_bundle_verifies_offline_and_tampering_is_caught(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An exported bundle verifies against the coordinator's key; editing one of its
    events breaks it; without a key nothing is proven."""
    bundle = tmp_path / "bundle.json"
    code, _ = cli(
        demo_dir, capsys, "audit", "export", run_of(demo_dir, "ok"), "--output", str(bundle)
    )
    assert code == 0
    keys = coordinator_key(demo_dir, capsys, tmp_path)
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 0 and "ok" in out
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle))
    assert code == 1 and "no_anchor" in out
    document = json.loads(bundle.read_text())
    document["events"][1]["data"]["reason"] = "edited"
    bundle.write_text(json.dumps(document))
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 1 and "broken" in out


def test_editing_the_database_directly_is_caught(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Changing one stored event with SQL makes `audit verify` name that event."""
    copy = tmp_path / "copy"
    copy.mkdir()
    source = sqlite3.connect(demo_dir / "federation.db")
    target = sqlite3.connect(copy / "federation.db")
    source.backup(target)
    source.close()
    broken_seq = target.execute(
        "SELECT min(seq) FROM audit_events WHERE canonical LIKE '%ACCEPTED%'"
    ).fetchone()[0]
    target.execute(
        "UPDATE audit_events SET canonical = replace(canonical, 'ACCEPTED', 'REJECTED') "
        "WHERE seq = ?",
        (broken_seq,),
    )
    target.commit()
    target.close()
    code, out = cli(copy, capsys, "audit", "verify")
    assert code == 1
    assert f"broken at event {broken_seq}" in out


VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verifier" / "verify_bundle.py"


def standalone(bundle: Path, *keys: str) -> tuple[int, dict[str, object]]:
    completed = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--json", *keys],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return completed.returncode, json.loads(completed.stdout)


def coordinator_key(data: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[str]:
    """``--coordinator-key FILE`` with the JWK Set exactly as `federation keys show` prints it."""
    code, out = cli(data, capsys, "keys", "show")
    assert code == 0
    (tmp_path / "coordinator-keys.json").write_text(out)
    return ["--coordinator-key", str(tmp_path / "coordinator-keys.json")]


def anchors(data: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[str]:
    """The coordinator's key and the key pinned for each remote that has one."""
    options = coordinator_key(data, capsys, tmp_path)
    for agent in Registry(DataDir(data)).agents():
        if agent.pinned_jwks.get("keys"):
            path = tmp_path / f"{agent.name}-keys.json"
            path.write_text(json.dumps(agent.pinned_jwks))
            options += ["--remote-key", str(path)]
    return options


def test_prove_writes_a_bundle_both_verifiers_accept_and_tampering_both_refuse(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`audit prove` writes a proof bundle; `audit verify --bundle` and the stand-alone
    verifier both accept it, and both refuse it once one event is edited."""
    bundle = tmp_path / "proof.json"
    run_id = run_of(demo_dir, "handoff")
    code, out = cli(demo_dir, capsys, "audit", "prove", run_id, "--output", str(bundle))
    assert code == 0 and "inclusion proofs" in out
    document = json.loads(bundle.read_text())
    assert document["tokens"] and all(t["claims_digest"] for t in document["tokens"])
    assert document["receipts"] and len(document["artifacts"]) == len(document["receipts"])
    keys = anchors(demo_dir, capsys, tmp_path)
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 0 and "ok" in out and "unanchored" not in out
    assert standalone(bundle, *keys) == (0, {**standalone(bundle, *keys)[1], "ok": True})
    document["events"][2]["canonical"] = document["events"][2]["canonical"].replace(
        "coordinator", "someone-else", 1
    )
    bundle.write_text(json.dumps(document))
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    status, result = standalone(bundle, *keys)
    assert code == status == 1
    assert "hash_mismatch" in out and result["reason"] == "hash_mismatch"


def test_verify_bundle_says_what_it_checked_and_with_which_keys(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`audit verify --bundle` used to print one ok line: now the steps, the kid of the
    coordinator key that signed the head, and each receipt with its event, handoff, the
    agent it came from and the kid of the remote key that verified it (issue 36)."""
    bundle = tmp_path / "proof.json"
    run_id = run_of(demo_dir, "handoff")
    assert cli(demo_dir, capsys, "audit", "prove", run_id, "--output", str(bundle))[0] == 0
    keys = anchors(demo_dir, capsys, tmp_path)
    remote = Registry(DataDir(demo_dir)).get("remote-risk")
    remote_kids = {jwk["kid"] for jwk in remote.pinned_jwks["keys"]}
    coordinator_kids = {jwk["kid"] for jwk in json.loads((tmp_path / "coordinator-keys.json")
                                                         .read_text())["keys"]}  # fmt: skip
    receipt_seqs = [entry["seq"] for entry in json.loads(bundle.read_text())["receipts"]]

    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 0, out
    assert "checked:" in out and "receipts: every event recording a receipt" in out
    head_line = next(line for line in out.splitlines() if line.startswith("tree head signed"))
    assert head_line.split()[-1] in coordinator_kids
    assert f"receipts: {len(receipt_seqs)} verified" in out
    lines = [line for line in out.splitlines() if line.startswith("  event ")]
    assert [int(line.split()[1].rstrip(",")) for line in lines] == receipt_seqs
    assert all(f"agent {remote.name}:" in line for line in lines), lines
    assert all(line.split("signed by key ")[1].split()[0] in remote_kids for line in lines)

    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(bundle), *keys, "--json")
    report = json.loads(out)
    assert [r["seq"] for r in report["receipts"]] == receipt_seqs
    assert {r["agent"] for r in report["receipts"]} == {remote.name}
    assert {r["kid"] for r in report["receipts"]} <= remote_kids
    assert report["head_kid"] in coordinator_kids and report["tokens"] >= 1


def test_consistency_between_two_proved_heads(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two heads signed as the ledger grew are consistent, from files or kept sizes;
    `audit verify` then checks the kept heads too."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    cli(demo_dir, capsys, "audit", "prove", run_of(demo_dir, "ok"), "--output", str(first))
    cli(demo_dir, capsys, "audit", "prove", run_of(demo_dir, "failure"), "--output", str(second))
    code, out = cli(demo_dir, capsys, "audit", "consistency", str(first), str(second))
    assert code == 0 and out.startswith("consistent"), out
    size = json.loads(
        base64.urlsafe_b64decode(json.loads(first.read_text())["tree_head"].split(".")[1] + "==")
    )["tree_size"]
    code, out = cli(demo_dir, capsys, "audit", "consistency", str(size), str(second), "--json")
    assert code == 0 and json.loads(out)["consistent"] is True
    code, out = cli(demo_dir, capsys, "audit", "verify")
    assert code == 0 and "signed tree heads" in out


def forged_end_to_end(genuine: dict[str, Any], path: Path) -> dict[str, Any]:
    """What an attacker holding only a key of its own makes of a genuine bundle: the same
    run in a ledger of its own with the disposition rewritten to approved, its artifacts,
    signed with its key end to end."""
    ledger = Ledger(open_engine(f"sqlite+pysqlite:///{path}"))
    migrate(ledger.engine)
    for entry in genuine["events"]:
        record = json.loads(entry["canonical"])
        if record["event_type"] == "run.disposition":
            record["data"]["status"] = "approved"
        fields = {name: record[name] for name in CORRELATION_FIELDS if name != "recorded_at"}
        ledger.append(AuditEvent(**fields, data=record["data"]))
    contents = [entry["content"] for entry in genuine["artifacts"]]
    attacker, remotes = Ed25519PrivateKey.generate(), genuine["jwks"]["keys"][1:]
    forged = prove_run(ledger, genuine["run_id"], attacker, remote_keys=remotes, artifacts=contents)
    result: dict[str, Any] = json.loads(json.dumps(forged))
    return result


def test_a_bundle_forged_with_another_key_proves_nothing_even_in_the_genuine_data_dir(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`audit verify --bundle` in the coordinator's own data directory: a forged bundle
    (disposition approved, signed end to end with an attacker's key) is no_anchor without
    a key, untrusted_key against the keys `keys show` prints, and a structure-only check
    says it proves nothing; the stand-alone verifier answers the same."""
    genuine = tmp_path / "genuine.json"
    cli(demo_dir, capsys, "audit", "prove", run_of(demo_dir, "handoff"), "--output", str(genuine))
    forged = tmp_path / "forged.json"
    forged.write_text(
        json.dumps(forged_end_to_end(json.loads(genuine.read_text()), tmp_path / "f.db"))
    )
    keys = anchors(demo_dir, capsys, tmp_path)
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(forged))
    assert code == 1 and "no_anchor" in out and "nothing is proven" in out
    assert standalone(forged)[1]["reason"] == "no_anchor" and standalone(forged)[0] == 1
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(forged), *keys)
    assert code == 1 and "untrusted_key" in out
    assert standalone(forged, *keys)[1]["reason"] == "untrusted_key"
    code, out = cli(demo_dir, capsys, "audit", "verify", "--bundle", str(forged), "--unanchored")
    assert code == 0 and "unanchored: structure only, nothing proven" in out
    status, result = standalone(forged, "--unanchored")
    assert status == 0 and result["anchored"] is False
    # POST /v1/audit/verify checks a bundle against the coordinator's own keys
    service = CoordinatorService(Workspace.resolve(DataDir(demo_dir), None))
    assert service.audit_verify(json.loads(forged.read_text())).kind == "untrusted_key"
    assert service.audit_verify(json.loads(genuine.read_text())).ok


def test_the_standalone_verifier_takes_the_jwk_set_keys_show_prints(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`keys show` prints a JWK Set; both verifiers take it (and a single JWK of it) as
    the coordinator's key; a key file that is no key is a usage error, not a traceback."""
    bundle = tmp_path / "proof.json"
    cli(demo_dir, capsys, "audit", "prove", run_of(demo_dir, "ok"), "--output", str(bundle))
    keys = anchors(demo_dir, capsys, tmp_path)
    status, result = standalone(bundle, *keys)
    assert (status, result["reason"], result["anchored"]) == (0, None, True)
    single = tmp_path / "single.json"
    single.write_text(json.dumps(json.loads(Path(keys[1]).read_text())["keys"][0]))
    with_single = ["--coordinator-key", str(single), *keys[2:]]
    assert standalone(bundle, *with_single)[0] == 0
    verify = ["audit", "verify", "--bundle", str(bundle)]
    code, out = cli(demo_dir, capsys, *verify, *with_single)
    assert code == 0 and out.startswith(f"bundle {bundle}: ok")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kty": "OKP", "crv": "Ed25519"}))
    code, _ = cli(demo_dir, capsys, *verify, "--coordinator-key", str(bad))
    assert code == 2
    completed = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--coordinator-key", str(bad)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 2 and "Traceback" not in completed.stderr


def _rotated_remote(data: DataDir, new: SigningKey) -> dict[str, Any]:
    """remote_risk's first key vouches for ``new``, which the coordinator adopted (pinned
    beside it, the statement kept); remote_risk's first keys as the auditor holds them."""
    registry = Registry(data)
    risk = registry.get("remote-risk")
    old = load_or_create(data.path("demo", "remote-risk", "keys")).active
    statement = sign_succession(old, new.verification_key())
    adopted = {
        **risk.model_dump(mode="json"),
        "pinned_jwks": {"keys": [*risk.pinned_jwks["keys"], new.public_jwk()]},
        "successions": [statement],
    }
    registry._save(RegisteredAgent.model_validate(adopted))
    return risk.pinned_jwks


def _run_answered_by(ledger: Ledger, signer: SigningKey) -> None:
    """A run whose token was minted for ``signer``'s identity and whose receipt it signed."""
    aud = identity_of(signer.verification_key())
    bound = {"jti": "jti-1", "req_digest": "sha-256:" + "r" * 43}
    grant = {**bound, "claims_digest": "sha-256:" + "ab" * 32, "aud": aud}
    receipt = issue_receipt(
        {
            **bound, "iss": aud, "task_id": "task-1", "handoff_id": "handoff-1",
            "attempt": 1, "artifact_digest": artifact_digest([]),
            "state": "TASK_STATE_COMPLETED", "issued_at": "2025-05-01T12:00:00.000Z",
        },
        signer,
    )  # fmt: skip
    where = {"run_id": "run-rotated", "handoff_id": "handoff-1", "attempt": 1}
    ledger.append(AuditEvent(event_type="grant.minted", actor="coordinator", **where, data=grant))
    state = {"remote_state": "TASK_STATE_COMPLETED"}
    ledger.append(
        AuditEvent(event_type="remote.state_observed", actor="coordinator",
                   remote_task_id="task-1", **where, data=state)
    )  # fmt: skip
    ledger.append(receipt_event(receipt, actor="coordinator", remote_task_id="task-1", **where))


def test_a_bundle_carries_the_succession_of_a_rotated_remote(
    demo_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """remote_risk rotated and the coordinator followed: `audit prove` carries the
    statement it kept, and `audit verify --bundle` and the stand-alone verifier, holding
    only remote_risk's first key, accept the new key's receipt and say that they followed
    one statement; without it, both answer untrusted_key."""
    shutil.copytree(demo_dir, tmp_path / "data")
    data, new = DataDir(tmp_path / "data"), SigningKey.generate("EdDSA")
    first = tmp_path / "risk-first-key.json"
    first.write_text(json.dumps(_rotated_remote(data, new)))
    _run_answered_by(Workspace.resolve(data, None).ledger(), new)
    bundle = tmp_path / "proof.json"
    code, out = cli(data.root, capsys, "audit", "prove", "run-rotated", "--output", str(bundle))
    assert code == 0, out
    document = json.loads(bundle.read_text())
    assert len(document["successions"]) == 1
    keys = [*coordinator_key(data.root, capsys, tmp_path), "--remote-key", str(first)]
    code, out = cli(data.root, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 0 and "remote keys extended by 1 key-succession statement(s)" in out, out
    assert standalone(bundle, *keys)[1]["successions"] == 1
    del document["successions"]
    bundle.write_text(json.dumps(document))
    code, out = cli(data.root, capsys, "audit", "verify", "--bundle", str(bundle), *keys)
    assert code == 1 and "untrusted_key" in out and "succession" not in out, out
    assert standalone(bundle, *keys) == (1, {**standalone(bundle, *keys)[1], "ok": False})
