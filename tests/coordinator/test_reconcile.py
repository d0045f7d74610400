"""``federation audit reconcile``: both sides of each handoff compared, each log witnessed.

Real processes: remote_risk (its decision log in its SQLite database, its audit routes
behind an operator token) and the coordinator's CLI. Two delegations, then reconcile:
both sides agree on jti, task id, request digest, artifact digest and final state, and
each side's log extends the heads the other holds. Then the remote's log is forked (an
early entry rewritten: the same size, another root, its heads signed as before): the
heads the coordinator kept from receipts expose it. Those heads are the receipts
themselves (each states the remote's log size and root: one signature per receipt), re-
verified with the pinned key when reconcile reads them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from agent_cards.transparency.receipts import RECEIPT_TYP
from agent_cards.transparency.statements import unverified_header
from coordinator.audit.log.tree_heads import WITNESSED
from coordinator.authority import identity
from coordinator.remote.cards.registry import Registry
from coordinator.storage.datadir import DataDir
from coordinator.storage.schema import tree_heads
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, federation, registered

TOKEN = "audit-operator-token-for-tests-0123456789"
VERIFIER = Path(__file__).parents[2] / "docs" / "verifier" / "verify_bundle.py"


def delegate(data: DataDir, input_file: Path) -> str:
    process = federation(
        data.root,
        *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
        *("--input", str(input_file), "--json"),
    )
    out, err = process.communicate(timeout=60)
    document = json.loads(out)
    assert document["local_state"] == "ACCEPTED", err
    run_id: str = document["run_id"]
    return run_id


def reconcile(data: DataDir, run_id: str) -> tuple[int, dict[str, Any]]:
    process = federation(data.root, "audit", "reconcile", run_id, "--json")
    out, err = process.communicate(timeout=60)
    assert out, err
    return process.returncode, json.loads(out)


def fork_first_entry(database: Path) -> None:
    """Rewrite entry 1 of the remote's decision log, hash and all (the log owner's fork)."""
    with sqlite3.connect(database) as connection:
        (canonical,) = connection.execute(
            "SELECT canonical FROM remote_risk_audit_log WHERE seq = 1"
        ).fetchone()
        record = json.loads(canonical)
        record["data"]["reason"] = "rewritten"
        forged = json.dumps(record, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(forged.encode()).hexdigest()
        connection.execute(
            "UPDATE remote_risk_audit_log SET canonical = ?, hash = ? WHERE seq = 1",
            (forged, digest),
        )


@pytest.fixture
def remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """remote_risk registered, its audit token registered for it (and for it only)."""
    monkeypatch.setenv("REMOTE_RISK_AUDIT_TOKEN", TOKEN)
    with registered(tmp_path) as running:
        secret = tmp_path / "audit.token"
        secret.write_text(TOKEN)
        setting = federation(
            running[0].root,
            "agents",
            "audit-credential",
            "remote-risk",
            "--token-file",
            str(secret),
        )
        assert setting.wait(timeout=60) == 0
        yield running


def witnessed_statements(data: DataDir) -> list[str]:
    """The statements of the remote's heads the coordinator kept (``witnessed``)."""
    workspace = Workspace(data)
    try:
        with workspace.engine().connect() as connection:
            query = select(tree_heads.c.jws).where(tree_heads.c.origin == WITNESSED)
            return list(connection.execute(query).scalars())
    finally:
        workspace.close()


def bundle_anchors(data: DataDir, tmp_path: Path) -> list[str]:
    """The stand-alone verifier's trust anchors: the coordinator's keys and the pinned
    remote's, as files (the bundle's own keys are never trusted)."""
    (tmp_path / "coordinator-keys.json").write_text(
        json.dumps(identity.coordinator_keys(data).public_jwks())
    )
    (tmp_path / "remote-keys.json").write_text(json.dumps(Registry(data).agents()[0].pinned_jwks))
    return [
        "--coordinator-key", str(tmp_path / "coordinator-keys.json"),
        "--remote-key", str(tmp_path / "remote-keys.json"),
    ]  # fmt: skip


def test_both_sides_agree_then_a_forked_remote_log_is_detected(remote: Any, tmp_path: Path) -> None:
    data, process = remote
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    delegate(data, input_file)
    run_id = delegate(data, input_file)

    status, document = reconcile(data, run_id)
    assert status == 0 and document["agree"] is True, document
    (handoff,) = document["handoffs"]
    assert {name: field["agree"] for name, field in handoff["fields"].items()} == {
        "jti": True,
        "task_id": True,
        "req_digest": True,
        "artifact_digest": True,
        "state": True,
    }
    assert handoff["fields"]["state"]["remote"] == "TASK_STATE_COMPLETED"
    (witness,) = document["witnesses"]
    assert len(witness["remote_log_extends_heads_we_hold"]) == 2  # one per receipt
    kept = witnessed_statements(data)  # each a receipt stating the log: no head signed apart
    assert len(kept) == 2 and {unverified_header(jws)["typ"] for jws in kept} == {RECEIPT_TYP}
    assert witness["our_ledger_extends_heads_it_holds"]  # one per token
    assert all(c["consistent"] for c in witness["our_ledger_extends_heads_it_holds"])

    # the receipt is in the run's proof bundle, and the stand-alone verifier agrees
    bundle = tmp_path / "bundle.json"
    proving = federation(data.root, "audit", "prove", run_id, "--output", str(bundle))
    assert proving.wait(timeout=60) == 0
    assert len(json.loads(bundle.read_text())["receipts"]) == 1
    checked = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), *bundle_anchors(data, tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    process.stop()
    fork_first_entry(tmp_path / "remote" / "remote-risk.db")
    process.start()
    status, document = reconcile(data, run_id)
    assert (status, document["verdict"], document["agree"]) == (1, "disagree", False)
    (witness,) = document["witnesses"]
    checks = witness["remote_log_extends_heads_we_hold"]
    assert checks and all(c["reason"] == "inconsistent" for c in checks), checks


def test_the_audit_routes_need_the_operator_token(remote: Any) -> None:
    """No token or another token: 401 with a challenge; the right one: a signed head."""
    _, process = remote
    url = f"{process.base_url}/audit/head"
    assert httpx.get(url, timeout=10).status_code == 401
    wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401 and "WWW-Authenticate" in wrong.headers
    right = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert right.status_code == 200 and right.json()["tree_head"].count(".") == 2


@pytest.fixture
def slow_remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """As ``remote``, its skill taking 30 s: time to cancel a run from another process."""
    monkeypatch.setenv("REMOTE_RISK_AUDIT_TOKEN", TOKEN)
    with registered(tmp_path, "--skill-delay-seconds", "30") as running:
        secret = tmp_path / "audit.token"
        secret.write_text(TOKEN)
        credential = ("agents", "audit-credential", "remote-risk", "--token-file", str(secret))
        assert federation(running[0].root, *credential).wait(timeout=60) == 0
        yield running


def _live_run(data: DataDir) -> str | None:
    process = federation(data.root, "runs", "--state", "live", "--json")
    out, _ = process.communicate(timeout=60)
    runs = json.loads(out)["runs"] if process.returncode == 0 and out else []
    return str(runs[0]["run_id"]) if runs else None


def test_a_run_cancelled_from_another_shell_still_reconciles(
    slow_remote: Any, tmp_path: Path
) -> None:
    """The remote logs the CancelTask's own token after the task's receipt; reconcile
    compares the token that sent the work on both sides, so the two agree."""
    data, _ = slow_remote
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    send = ("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy")
    delegation = federation(data.root, *send, "--input", str(input_file), "--json")
    try:
        run_id = None
        for _ in range(120):
            run_id = _live_run(data)
            if run_id is not None:
                break
        assert run_id is not None, "the run never showed live"
        cancel = federation(data.root, "cancel", run_id, "--reason", "wrong brief")
        assert cancel.wait(timeout=60) == 0
        out, err = delegation.communicate(timeout=60)
    finally:
        delegation.kill()
    assert json.loads(out)["cancelled"], err
    status, document = reconcile(data, run_id)
    assert (status, document["verdict"]) == (0, "agree"), document
