"""A second member, built on the member kit from one file (examples/terms_member.py), joins
the federation the way remote_risk does.

Real processes: the example as its own process (trusting the coordinator's JWK Set), the
coordinator's CLI for every operator step. The member is registered with its key pinned
(``--expect-kid`` of the kid it prints) and its return schema; a delegation is ACCEPTED
with a receipt by that member's key; ``audit reconcile`` agrees with the member's own
decision log; a proof bundle verifies with that member's key alone (and not without it);
and the kit refuses a token meant for another agent, as remote_risk does.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.keys import load_key_set
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests import tokens
from tests.processes import federation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "terms_member.py"
SCHEMA = ROOT / "examples" / "terms_schema.json"
VERIFIER = ROOT / "docs" / "verifier" / "verify_bundle.py"
AUDIT_TOKEN = secrets.token_urlsafe(32)
INPUT = {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}


@pytest.fixture
def member(tmp_path: Path) -> Iterator[tuple[DataDir, str, Path]]:
    """(the coordinator's data directory, the member's URL, the member's data directory)."""
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    member_dir = tmp_path / "terms"
    trust = f"{DEFAULT_ISSUER}={data.path('jwks.json')}"
    args = [sys.executable, str(EXAMPLE), "--data-dir", str(member_dir), "--trust-issuer", trust]
    env = {**os.environ, "TERMS_AUDIT_TOKEN": AUDIT_TOKEN}
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT
    )
    assert process.stdout is not None
    try:
        first = process.stdout.readline().strip()
        assert first.startswith("legal_terms listening on "), first
        yield data, first.rpartition(" ")[2], member_dir
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()


def cli(data: DataDir, *args: str) -> tuple[int, str, str]:
    process = federation(data.root, *args)
    out, err = process.communicate(timeout=120)
    return process.returncode, out, err


def test_a_member_built_on_the_kit_joins_and_is_audited(
    member: tuple[DataDir, str, Path], tmp_path: Path
) -> None:
    data, url, member_dir = member
    kid = load_key_set(member_dir / "keys").active.kid
    schema = f"check-terms={SCHEMA}"
    code, out, err = cli(data, "register", url, f"--expect-kid={kid}", "--return-schema", schema)
    assert code == 0, (out, err)

    payload = tmp_path / "input.json"
    payload.write_text(json.dumps(INPUT))
    code, out, err = cli(
        data, "delegate", "--to", "legal-terms", "--skill", "check-terms", "--input",
        str(payload), "--json",
    )  # fmt: skip
    document: dict[str, Any] = json.loads(out)
    assert (code, document["local_state"]) == (0, "ACCEPTED"), (document, err)
    run_id = document["run_id"]

    secret = tmp_path / "audit.token"
    secret.write_text(AUDIT_TOKEN + "\n")
    assert (
        cli(data, "agents", "audit-credential", "legal-terms", "--token-file", str(secret))[0] == 0
    )
    code, out, err = cli(data, "audit", "reconcile", run_id, "--json")
    report = json.loads(out)
    assert (code, report["agree"]) == (0, True), (report, err)
    (handoff,) = report["handoffs"]
    assert handoff["agent"] == "legal-terms" and handoff["agree"] is True

    bundle = tmp_path / "bundle.json"
    assert cli(data, "audit", "prove", run_id, "--output", str(bundle))[0] == 0
    coordinator_key = tmp_path / "coordinator.json"
    coordinator_key.write_text(json.dumps(coordinator_keys(data).public_jwks()))
    member_key = tmp_path / "member.json"
    member_key.write_text(json.dumps(load_key_set(member_dir / "keys").public_jwks()))
    verdict = _standalone(bundle, "--coordinator-key", str(coordinator_key), "--remote-key",
                          str(member_key))  # fmt: skip
    assert verdict["ok"] is True and verdict["anchored"] is True, verdict
    without = _standalone(bundle, "--coordinator-key", str(coordinator_key))
    assert without["reason"] == "untrusted_key"


def test_the_kit_refuses_a_token_for_another_agent(member: tuple[DataDir, str, Path]) -> None:
    """A delegation token the coordinator minted for another audience: refused with the
    same stable reason remote_risk gives, before any task exists."""
    data, url, _ = member
    key = coordinator_keys(data).active
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=DEFAULT_ISSUER,
        audience="urn:ietf:params:oauth:jwk-thumbprint:sha-256:" + "A" * 43,
        scope="terms:check",
    )
    token = tokens.forge(tokens.header(key), claims, key=key.private_key)
    answer = httpx.post(
        f"{url}/a2a/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        timeout=30,
    )
    error = answer.json()["error"]
    (info,) = error["data"]
    assert info["metadata"]["reason"] == "audience_mismatch", error


def _standalone(bundle: Path, *keys: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(VERIFIER), str(bundle), "--json", *keys],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout)
    return result
