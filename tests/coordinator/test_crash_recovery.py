"""A coordinator killed with SIGKILL mid-handoff is continued by `federation recover`.

The coordinator is a real subprocess (`federation delegate`), paused at a named point and
killed there; remote_risk keeps running. After `federation recover` on the same database
the handoff must reach its correct terminal state, the remote must hold exactly one task
for it, and the audit ledger must still verify.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI

from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import PAYLOAD
from tests.servers import free_port, running


@dataclass
class Setup:
    data: Path
    app: FastAPI
    input_file: Path


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    """remote_risk trusting this data directory's coordinator keys, registered there."""
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
    )
    app = create_app(settings)
    with running(app, port=port) as url:

        async def register() -> None:
            pins = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
            async with A2AClient() as client:
                # remote_risk answers with our Finding contract; the operator says so.
                declared = {RISK_SKILL: finding_contract(source="registration")}
                await Registry(data).register(client, url, anchor=pins, return_contracts=declared)

        asyncio.run(register())
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        yield Setup(data.root, app, input_file)


def federation(setup: Setup, *args: str, **env: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "FEDERATION_DATA_DIR": str(setup.data), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "coordinator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def kill_at(setup: Setup, point: str) -> None:
    marker = setup.data / f"paused-{point}"
    process = federation(
        setup,
        "delegate",
        "--to",
        "remote-risk",
        "--skill",
        "interpret-risk-policy",
        "--input",
        str(setup.input_file),
        "--timeout",
        "30",
        FEDERATION_PAUSE_AT=point,
        FEDERATION_PAUSE_MARKER=str(marker),
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the coordinator never reached the pause point"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


@pytest.mark.parametrize("point", ["before_dispatch", "after_dispatch", "before_admission"])
def test_sigkill_then_recover(setup: Setup, point: str) -> None:
    """Killed at each point, the handoff is continued to ACCEPTED with one remote task."""
    kill_at(setup, point)
    workspace = Workspace(DataDir(setup.data))
    in_flight = workspace.run_store().in_flight()
    assert len(in_flight) == 1, "the killed coordinator left its handoff in flight"

    recovered = federation(setup, "recover")
    out, err = recovered.communicate(timeout=60)
    assert recovered.returncode == 0, err
    assert "ACCEPTED" in out

    store = workspace.run_store()
    assert store.in_flight() == []
    [attempt_id] = in_flight
    stored = store.handoff(attempt_id)
    assert stored is not None and stored[0].state.value == "ACCEPTED"
    assert len(setup.app.state.task_store) == 1, "the remote created a second task"

    verified = federation(setup, "audit", "verify")
    verify_out, _ = verified.communicate(timeout=60)
    assert verified.returncode == 0 and verify_out.startswith("ledger: ok")
