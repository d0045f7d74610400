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

import httpx
import pytest

from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests import tokens
from tests.interop.membership import joins_and_is_audited

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "terms_member.py"
SCHEMA = ROOT / "examples" / "terms_schema.json"
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
    env = {**os.environ, "LEGAL_TERMS_AUDIT_TOKEN": AUDIT_TOKEN}
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


def test_a_member_built_on_the_kit_joins_and_is_audited(
    member: tuple[DataDir, str, Path], tmp_path: Path
) -> None:
    data, url, member_dir = member
    skill = ("check-terms", json.loads(SCHEMA.read_text()), INPUT)
    joins_and_is_audited(data, url, member_dir / "keys", skill, AUDIT_TOKEN, tmp_path)


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
