"""A member joining with real processes: registered with its key pinned, delegated to
once, reconciled and proven, each step by the coordinator's CLI.

What ``tests/interop/test_guard.py`` and ``test_sdk_member.py`` both hold of a member:
registration with ``--expect-kid``, a delegation ACCEPTED with ``schema_matched``,
``audit reconcile`` agreeing with the member's decision log, and a proof bundle that
verifies with the member's key alone (and not without it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_cards.keys import load_key_set
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests.processes import federation

ROOT = Path(__file__).resolve().parents[2]
VERIFIER = ROOT / "docs" / "verifier" / "verify_bundle.py"


def cli(data: DataDir, *args: str) -> tuple[int, str, str]:
    process = federation(data.root, *args)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def joins_and_is_audited(
    data: DataDir,
    url: str,
    keys_dir: Path,
    skill: tuple[str, dict[str, Any], dict[str, Any]],
    audit_token: str,
    work: Path,
) -> None:
    """The member at ``url`` (its keys in ``keys_dir``; ``skill``: its name, the schema
    of its answer and an input) joins as ``member`` and passes every audit step."""
    name, answer_schema, given = skill
    keys = load_key_set(keys_dir)
    schema = work / "answer.schema.json"
    schema.write_text(json.dumps(answer_schema))
    code, out, err = cli(
        data, "register", url, "--name", "member", f"--expect-kid={keys.active.kid}",
        "--return-schema", f"{name}={schema}",
    )  # fmt: skip
    assert code == 0, (out, err)
    payload = work / "input.json"
    payload.write_text(json.dumps(given))
    code, out, err = cli(
        data, "delegate", "--to", "member", "--skill", name, "--input", str(payload), "--json"
    )
    document = json.loads(out)
    assert (code, document["local_state"]) == (0, "ACCEPTED"), (document, err)
    (branch,) = document["branches"]
    assert branch["reason"] == "schema_matched"
    run_id = document["run_id"]

    secret = work / "audit.token"
    secret.write_text(audit_token + "\n")
    assert cli(data, "agents", "audit-credential", "member", "--token-file", str(secret))[0] == 0
    code, out, err = cli(data, "audit", "reconcile", run_id, "--json")
    report = json.loads(out)
    assert (code, report["agree"]) == (0, True), (report, err)
    (handoff,) = report["handoffs"]
    assert handoff["agent"] == "member" and handoff["agree"] is True

    bundle = work / "bundle.json"
    assert cli(data, "audit", "prove", run_id, "--output", str(bundle))[0] == 0
    assert json.loads(bundle.read_text())["receipts"]  # the member's receipt, on its verdict
    coordinator_key = work / "coordinator.json"
    coordinator_key.write_text(json.dumps(coordinator_keys(data).public_jwks()))
    member_key = work / "member.json"
    member_key.write_text(json.dumps(keys.public_jwks()))
    verdict = standalone(
        bundle, "--coordinator-key", str(coordinator_key), "--remote-key", str(member_key)
    )
    assert verdict["ok"] is True and verdict["anchored"] is True, verdict
    without = standalone(bundle, "--coordinator-key", str(coordinator_key))
    assert without["reason"] == "untrusted_key"


def standalone(bundle: Path, *keys: str) -> dict[str, Any]:
    """The standalone verifier's verdict on ``bundle`` with the keys given."""
    done = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--json", *keys],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout)
    return result
