"""A run whose task return admission never judged still proves: its receipt's artifacts
are kept with the receipt.

Real processes: remote_risk (slow, so a run can be cancelled while it works) and the
coordinator's CLI. A run whose task remote_risk fails, and a run cancelled from another
process while remote_risk works, each keep the remote's receipt; ``federation audit
prove`` then carries the exact artifacts each receipt covers, and ``federation audit
verify --bundle`` with the reader's own keys (the coordinator's, the pinned remote's)
says the genuine bundle is ok.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.authority import identity
from coordinator.remote.cards.registry import Registry
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.risk.skill import FAILURE_SWITCH
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, registered

SKILL_DELAY_SECONDS = "10"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path, "--skill-delay-seconds", SKILL_DELAY_SECONDS) as running:
        yield running


def start_delegate(data: DataDir, payload: dict[str, Any], tmp_path: Path) -> Any:
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(payload))
    return federation(
        data.root,
        *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
        *("--input", str(input_file), "--json"),
    )


def live_run(data: DataDir) -> str:
    """The run id once its handoff is working at the remote."""
    store = Workspace(data).run_store()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for _, run_id, _ in store.run_page(5):
            if any(r.remote_state == "TASK_STATE_WORKING" for r in store.run_records(run_id)):
                return str(run_id)
        time.sleep(0.05)
    raise AssertionError("the handoff never reached the remote")


def proves(data: DataDir, run_id: str, tmp_path: Path) -> dict[str, Any]:
    """``audit prove`` the run, then ``audit verify --bundle`` it with the reader's keys:
    the verifier's report (asserted ok)."""
    bundle = tmp_path / "bundle.json"
    proving = federation(data.root, "audit", "prove", run_id, "--output", str(bundle))
    assert proving.wait(timeout=60) == 0, proving.communicate()
    ours = tmp_path / "coordinator-keys.json"
    ours.write_text(json.dumps(identity.coordinator_keys(data).public_jwks()))
    theirs = tmp_path / "remote-keys.json"
    theirs.write_text(json.dumps(Registry(data).agents()[0].pinned_jwks))
    checked = federation(
        data.root,
        *("audit", "verify", "--bundle", str(bundle), "--json"),
        *("--coordinator-key", str(ours), "--remote-key", str(theirs)),
    )
    out, err = checked.communicate(timeout=60)
    assert checked.returncode == 0, out + err
    document: dict[str, Any] = json.loads(bundle.read_text())
    assert document["receipts"] and len(document["artifacts"]) == len(document["receipts"])
    return document


def test_a_failed_run_proves(remote: tuple[DataDir, RemoteRiskProcess], tmp_path: Path) -> None:
    data, _ = remote
    failing = {**PAYLOAD, "policy_note": {**PAYLOAD["policy_note"], FAILURE_SWITCH: True}}
    process = start_delegate(data, failing, tmp_path)
    out, err = process.communicate(timeout=60)
    document = json.loads(out)
    assert document["local_state"] == "FAILED", err
    proves(data, document["run_id"], tmp_path)


def test_a_run_cancelled_while_the_remote_works_proves(
    remote: tuple[DataDir, RemoteRiskProcess], tmp_path: Path
) -> None:
    data, _ = remote
    process = start_delegate(data, PAYLOAD, tmp_path)
    run_id = live_run(data)
    cancelling = federation(data.root, "cancel", run_id, "--reason", "not needed")
    assert cancelling.wait(timeout=60) == 0, cancelling.communicate()
    out, err = process.communicate(timeout=60)
    assert json.loads(out)["local_state"] == "CANCELLED", err
    proves(data, run_id, tmp_path)
