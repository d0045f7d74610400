"""``federation audit reconcile`` across the hops of a delegation chain.

Real processes (coordinator/assessment/chain_case.py): the coordinator's API, the privacy
team's member (A) and the legal team's (B), A asking B with a child token minted by
token exchange. Reconcile compares the first handoff with A's decision log and the hop
with B's, each asked with the audit credential registered for it alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.assessment.chain_case import PRIVACY, TERMS, chain_result, chain_services

TOKEN = "chain-audit-token-for-tests-0123456789abc"


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], str]]:
    """A chain's run, both members serving their audit routes; the local CLI's environment
    (the coordinator's data directory) and the run's id."""
    root = tmp_path_factory.mktemp("chain-reconcile")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    environ.update(LEGAL_TERMS_AUDIT_TOKEN=TOKEN, PRIVACY_REVIEW_AUDIT_TOKEN=TOKEN)
    (root / "audit.token").write_text(TOKEN)
    with chain_services(root, root / "data", environ) as services:
        result = chain_result(services)
        assert result.local_state == "ACCEPTED" and result.nested
        local = {k: v for k, v in services.env.items() if k != "FEDERATION_SERVER"}
        yield local, result.run_id


def federation(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "coordinator", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def credential(env: dict[str, str], name: str) -> None:
    token_file = str(Path(env["FEDERATION_DATA_DIR"]).parent / "audit.token")
    done = federation(env, "agents", "audit-credential", name, "--token-file", token_file)
    assert done.returncode == 0, done.stderr


def reconcile(env: dict[str, str], run_id: str) -> tuple[int, dict[str, Any]]:
    done = federation(env, "audit", "reconcile", run_id, "--json")
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_reconcile_compares_every_hop_with_its_agents_log(
    chain_run: tuple[dict[str, str], str],
) -> None:
    """Without the legal team's credential its hop is not checked (and says why); with
    it, the hop's token agrees with the legal team's decision and receipt, the first
    handoff with the privacy team's, and each log extends the heads the other holds."""
    env, run_id = chain_run
    credential(env, PRIVACY)
    code, report = reconcile(env, run_id)
    by_agent = {entry["agent"]: entry for entry in report["handoffs"]}
    assert set(by_agent) == {PRIVACY, TERMS}, report
    hop = by_agent[TERMS]
    assert hop["reason"] == "audit_credential_missing" and hop["depth"] == 2, hop
    assert code == 5 and report["verdict"] == "not_checked"
    credential(env, TERMS)
    code, report = reconcile(env, run_id)
    assert code == 0 and report["verdict"] == "agree", report
    by_agent = {entry["agent"]: entry for entry in report["handoffs"]}
    first, hop = by_agent[PRIVACY], by_agent[TERMS]
    assert hop["parent_handoff_id"] == first["handoff_id"] and hop["depth"] == 2
    assert hop["handoff_id"].startswith("hop-") and list(hop["fields"]) == ["jti"]
    assert hop["fields"]["jti"]["agree"] and hop["fields"]["jti"]["remote"] is not None
    assert first["fields"]["state"]["remote"] == "TASK_STATE_COMPLETED"
    assert {witness["agent"] for witness in report["witnesses"]} == {PRIVACY, TERMS}
    text = federation(env, "audit", "reconcile", run_id).stdout
    assert f"({TERMS}, hop 2 from {first['handoff_id']}): agree" in text
