"""Several coordinator processes share one PostgreSQL database through handoff lease rows."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI

from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import PAYLOAD
from tests.servers import free_port, running


@dataclass
class Shared:
    ws: Workspace
    app: FastAPI
    url: str


@pytest.fixture
def shared(tmp_path: Path, postgres_url: str) -> Iterator[Shared]:
    """A slow remote_risk, and a data directory whose state lives in a PostgreSQL schema."""
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        skill_delay_seconds=1.0,
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
        ws = Workspace(data, postgres_url)
        yield Shared(ws, app, postgres_url)
        ws.close()


def submit(shared: Shared, count: int) -> list[str]:
    service = CoordinatorService(shared.ws)
    agent = service.agent("remote-risk")
    order = DelegationOrder(agent=agent, skill="interpret-risk-policy", payload=PAYLOAD)
    return [service.submit(order).attempt_id for _ in range(count)]


def worker(shared: Shared) -> subprocess.Popen[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(shared.ws.data.root)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--database-url",
            shared.url,
            "worker",
            "--lease-seconds",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_until(condition: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def resumed_by(shared: Shared) -> dict[str, list[str]]:
    drivers: dict[str, list[str]] = {}
    for event in shared.ws.ledger().events():
        if event.event_type == "handoff.resumed":
            key = f"{event.handoff_id}/{event.attempt}"
            drivers.setdefault(key, []).append(event.data["driver"])
    return drivers


def states(shared: Shared, attempts: list[str]) -> Counter[str]:
    store = shared.ws.run_store()
    return Counter(store.handoff(a)[0].state.value for a in attempts)  # type: ignore[index]


def test_two_replicas_drive_each_handoff_once(shared: Shared) -> None:
    """Two workers at once: every handoff is driven by exactly one of them and accepted."""
    attempts = submit(shared, 10)
    first, second = worker(shared), worker(shared)
    try:
        wait_until(lambda: shared.ws.run_store().in_flight() == [])
    finally:
        for process in (first, second):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)
    assert states(shared, attempts) == Counter({"ACCEPTED": 10})
    drivers = resumed_by(shared)
    assert all(len(drivers[a]) == 1 for a in attempts), drivers
    assert len(shared.app.state.task_store) == 10
    verified = subprocess.run(
        [sys.executable, "-m", "coordinator", "--database-url", shared.url, "audit", "verify"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "FEDERATION_DATA_DIR": str(shared.ws.data.root)},
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_dead_replica_s_handoffs_are_taken_over(shared: Shared) -> None:
    """Worker A is SIGKILLed mid-flight; after its leases lapse worker B finishes its work."""
    attempts = submit(shared, 6)
    first = worker(shared)
    wait_until(lambda: all(a in resumed_by(shared) for a in attempts))
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert shared.ws.run_store().in_flight(), "the killed worker left nothing in flight"
    second = worker(shared)
    try:
        wait_until(lambda: shared.ws.run_store().in_flight() == [])
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=20)
    assert states(shared, attempts) == Counter({"ACCEPTED": 6})
    drivers = resumed_by(shared)
    taken_over = [a for a in attempts if len(set(drivers[a])) == 2]
    assert taken_over, "no handoff was taken over by the second worker"
    assert len(shared.app.state.task_store) == 6, "a handoff created a second remote task"
    print(json.dumps({"taken_over": len(taken_over)}))
