"""A handoff re-sent after remote_risk evicted its task is answered, not done again.

The coordinator (a real `federation delegate` process) is killed right after its send
reached remote_risk, before it noted the remote task. remote_risk (capacity one task)
finishes that task and then evicts it for the next handoff's task. `federation recover`
sends the first handoff again under the same idempotency key: remote_risk must remember
the key for its retention window, independently of the eviction, and answer the task it
already did; exactly one task is ever created per handoff.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import DECLARED, PAYLOAD, federation
from tests.servers import free_port, running

DELEGATE = ("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy", "--json")


def delegate(data: Path, input_file: Path, **env: str) -> Any:
    return federation(data, *DELEGATE, "--input", str(input_file), "--timeout", "30", **env)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_eviction_then_recover_creates_exactly_one_task(tmp_path: Path, store: str) -> None:
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
        task_capacity=1,
        data_dir=tmp_path / "remote" if store == "sqlite" else None,
    )
    app = create_app(settings)
    created: set[str] = set()
    app.state.task_store.on_eviction(lambda owner, task_id: created.add(task_id))
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    with running(app, port=port) as url:
        register(data, app, url)
        marker = data.path("paused-after_dispatch")
        killed = delegate(
            data.root,
            input_file,
            FEDERATION_PAUSE_AT="after_dispatch",
            FEDERATION_PAUSE_MARKER=str(marker),
        )
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert killed.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
        [attempt_id] = Workspace(data).run_store().in_flight()

        second = delegate(data.root, input_file)
        out, err = second.communicate(timeout=60)
        assert json.loads(out)["local_state"] == "ACCEPTED", err
        assert len(created) == 1, "the second handoff's task evicted the first one's"

        recovered = federation(data.root, "recover")
        out, err = recovered.communicate(timeout=60)
        assert recovered.returncode == 0, err
        task_count = len(created) + len(app.state.task_store)

    stored = Workspace(data).run_store().handoff(attempt_id)
    assert stored is not None
    record = stored[0]
    assert record.state.value == "ACCEPTED", out
    assert task_count == 2, "one task per handoff, none created again by the recovery"
    assert record.remote_task_id in created, "answered with the evicted task"


def register(data: DataDir, app: FastAPI, url: str) -> None:
    async def register() -> None:
        pins = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
        async with A2AClient() as client:
            await Registry(data).register(client, url, anchor=pins, return_contracts=DECLARED)

    asyncio.run(register())
