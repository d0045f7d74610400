"""`federation worker` processes: a slot that frees is filled at once, and a dead or frozen
worker's handoff is taken over within about its lease.

Real processes on one SQLite database: workers with a 2 s lease, handoffs submitted
through the service facade (as the API does), remote_risk in this process. Takeover is
measured from the signal to the moment another worker holds the handoff's lease row;
the bound asserted is loose (the figures are in the closing note and ``bench/``).
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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.storage.schema import handoffs
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import DECLARED, PAYLOAD, wait_for
from tests.servers import free_port, running

LEASE_SECONDS = 2.0


@dataclass
class Fleet:
    ws: Workspace
    remotes: dict[str, FastAPI]
    workers: list[subprocess.Popen[str]]

    def submit(self, remote: str, timeout: float = 60) -> str:
        service = CoordinatorService(self.ws)
        order = DelegationOrder(
            agent=service.agent(remote),
            skill="interpret-risk-policy",
            payload=PAYLOAD,
            timeout=timeout,
        )
        attempt_id: str = service.submit(order).attempt_id
        return attempt_id

    def state(self, attempt_id: str) -> str:
        stored = self.ws.run_store().handoff(attempt_id)
        assert stored is not None
        return stored[0].state.value

    def driver_of(self, attempt_id: str) -> str | None:
        with self.ws.engine().connect() as connection:
            query = select(handoffs.c.driver).where(handoffs.c.attempt_id == attempt_id)
            driver: str | None = connection.execute(query).scalar()
        return driver

    def start_worker(self) -> subprocess.Popen[str]:
        env = {**os.environ, "FEDERATION_DATA_DIR": str(self.ws.data.root)}
        process = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "worker", "--lease-seconds", str(LEASE_SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert process.stdout is not None
        assert process.stdout.readline().startswith("worker ")
        self.workers.append(process)
        return process


def pid_of(driver: str) -> int:
    return int(driver.split(":")[1])


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """Two remote_risk services, a slow one (6 s per task) and a quick one (0.2 s)."""
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    remotes: dict[str, FastAPI] = {}
    with ExitStack() as stack:
        for name, delay in (("slow", 6.0), ("quick", 0.2)):
            port = free_port()
            app = create_app(
                Settings(
                    public_base_url=f"http://127.0.0.1:{port}",
                    skill_delay_seconds=delay,
                    trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
                )
            )
            url = stack.enter_context(running(app, port=port))
            asyncio.run(_register(data, app, url, name))
            remotes[name] = app
        ws = Workspace(data)
        fleet = Fleet(ws, remotes, [])
        try:
            yield fleet
        finally:
            for process in fleet.workers:
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)
                    process.kill()
                    process.wait(timeout=10)
            ws.close()


async def _register(data: DataDir, app: FastAPI, url: str, name: str) -> None:
    pins = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
    async with A2AClient() as client:
        await Registry(data).register(
            client, url, name=name, anchor=pins, return_contracts=DECLARED
        )


def test_a_quick_handoff_does_not_wait_behind_a_slow_one(fleet: Fleet) -> None:
    """One worker: the slow handoff is claimed first, the quick one submitted after it is
    claimed as soon as it is admitted (a free slot), and ends long before the slow one."""
    fleet.start_worker()
    slow = fleet.submit("slow")
    wait_for(lambda: fleet.state(slow) == "RUNNING", 30, "the slow handoff to run")
    quick = fleet.submit("quick")
    wait_for(lambda: fleet.state(quick) == "ACCEPTED", 30, "the quick handoff to end")
    assert fleet.state(slow) == "RUNNING", "the quick handoff waited for the slow one"
    wait_for(lambda: fleet.state(slow) == "ACCEPTED", 30, "the slow handoff to end")


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_dead_or_frozen_workers_handoff_is_taken_over_within_its_lease(
    fleet: Fleet, fault: str
) -> None:
    """Two workers; the one driving a slow handoff is killed (or frozen): the other holds
    the handoff's lease soon after (well under 2x the lease plus an idle interval), the
    handoff ends ACCEPTED, and the remote holds one task for it."""
    fleet.start_worker()
    fleet.start_worker()
    attempt = fleet.submit("slow")
    wait_for(lambda: fleet.state(attempt) == "RUNNING", 30, "the handoff to run")
    first = fleet.driver_of(attempt)
    assert first is not None
    os.kill(pid_of(first), getattr(signal, fault))
    hit = time.monotonic()
    if fault == "SIGKILL":  # reaped, as its parent (a shell, a supervisor) would
        [killed] = [w for w in fleet.workers if w.pid == pid_of(first)]
        killed.wait(timeout=10)
    wait_for(lambda: fleet.driver_of(attempt) not in (None, first), 30, "a takeover")
    takeover = time.monotonic() - hit
    wait_for(lambda: fleet.state(attempt) == "ACCEPTED", 30, "the handoff to end")
    assert len(fleet.remotes["slow"].state.task_store) == 1, "sent once"
    assert takeover < 4 * LEASE_SECONDS, takeover
    print(json.dumps({"fault": fault, "lease_s": LEASE_SECONDS, "takeover_s": round(takeover, 2)}))
