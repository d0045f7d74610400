"""A real `federation serve coordinator` whose SQLite database turns read-only for seconds.

How the database is made read-only as root: see :mod:`tests.faults` (``chattr +i`` on the
database file and its WAL). Where the filesystem has no immutable flag the test is
skipped.

While the fault lasts a write must answer 503 ``storage_unavailable`` with
``Retry-After``, on a connection that stays usable, and nothing is minted or sent;
``/healthz`` (readiness, a real write) answers 503 while ``/livez`` answers 200. Once the
fault ends the same process serves writes again, without a restart, and every handoff
ends with exactly one remote task.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
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
from tests.faults import database_files, immutable_flag_works, read_only
from tests.processes import DECLARED, PAYLOAD, wait_for
from tests.servers import free_port, running

TOKEN = "operator-token-for-tests-0123456789"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}
TERMINAL = {"ACCEPTED", "REJECTED", "RETURNED_UNVERIFIED", "CANCELLED", "TIMED_OUT", "FAILED"}
COUNTED = ("handoff.resumed", "grant.minted", "message.dispatched")
DELEGATION = {"to": "remote-risk", "skill": "interpret-risk-policy", "input": PAYLOAD}


@dataclass
class Coordinator:
    url: str
    data: DataDir
    remote: FastAPI
    process: subprocess.Popen[str]

    @property
    def database_files(self) -> list[Path]:
        return database_files(self.data.path("federation.db"))


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[Coordinator]:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
        skill_delay_seconds=1.5,  # long enough for a fault to fall inside a handoff
    )
    remote = create_app(settings)
    with running(remote, port=port) as remote_url:

        async def register() -> None:
            pins = TrustAnchor(keys=remote.state.signing_keys.trusted_keys())
            async with A2AClient() as client:
                await Registry(data).register(
                    client, remote_url, anchor=pins, return_contracts=DECLARED
                )

        asyncio.run(register())
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
        env = {
            **inherited,
            "FEDERATION_DATA_DIR": str(data.root),
            "FEDERATION_OPERATOR_TOKEN": TOKEN,
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coordinator",
                "serve",
                "coordinator",
                "--port",
                "0",
                "--worker-lease-seconds",
                "2",  # a drive cut off by the fault is picked up again within seconds
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline().strip()
            assert first.startswith("coordinator listening on "), first
            yield Coordinator(first.rsplit(" ", 1)[1], data, remote, process)
        finally:
            read_only(database_files(data.path("federation.db")), False)
            process.terminate()
            process.wait(timeout=30)


def run_state(client: httpx.Client, run_id: str) -> str | None:
    document: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
    branches = document.get("branches") or []
    return branches[0]["state"] if branches else None


def submit(client: httpx.Client, **options: Any) -> httpx.Response:
    return client.post("/v1/delegations", json={**DELEGATION, "wait": False, **options})


def submit_honouring_retry_after(client: httpx.Client, attempts: int = 5) -> httpx.Response:
    """Submit as a well-behaved client does: a 503 is tried again after its Retry-After
    (a write racing the database's own recovery right after the fault may still get one)."""
    for _ in range(attempts - 1):
        answer = submit(client)
        if answer.status_code != 503:
            return answer
        time.sleep(int(answer.headers["Retry-After"]))
    return submit(client)


def accepted(client: httpx.Client, run_id: str) -> None:
    wait_for(lambda: run_state(client, run_id) == "ACCEPTED", 60, f"run {run_id} accepted")


def test_a_read_only_database_answers_503_and_recovers_without_a_restart(
    coordinator: Coordinator,
) -> None:
    with httpx.Client(base_url=coordinator.url, headers=AUTHORIZED, timeout=30) as client:
        before = submit(client)
        assert before.status_code == 202, before.text
        accepted(client, before.json()["run_id"])
        tasks_before = len(coordinator.remote.state.task_store)
        assert client.get("/healthz").status_code == 200

        read_only(coordinator.database_files, True)
        try:
            refused = [submit(client) for _ in range(3)]
            waited = client.post("/v1/delegations", json={**DELEGATION, "wait": True})
            health = client.get("/healthz")
            alive = client.get("/livez")
            time.sleep(2)  # the background worker meets the fault too
        finally:
            read_only(coordinator.database_files, False)

        for answer in [*refused, waited]:
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["reason"] == "storage_unavailable"
            assert int(answer.headers["Retry-After"]) >= 1
            assert answer.headers.get("connection", "").lower() != "close"
        assert health.status_code == 503
        assert health.json()["error"]["reason"] == "storage_unavailable"
        assert alive.status_code == 200
        assert len(coordinator.remote.state.task_store) == tasks_before, "nothing was sent"

        wait_for(lambda: client.get("/healthz").status_code == 200, 30, "readiness again")
        after = submit_honouring_retry_after(client)
        assert after.status_code == 202, after.text
        accepted(client, after.json()["run_id"])
        assert coordinator.process.poll() is None, "served on without a restart"
    assert len(coordinator.remote.state.task_store) == tasks_before + 1
    listed = httpx.get(f"{coordinator.url}/v1/runs", headers=AUTHORIZED, timeout=30).json()
    ids = {run["run_id"] for run in listed["runs"]}
    assert ids == {before.json()["run_id"], after.json()["run_id"]}, "refused writes left no run"


def test_a_handoff_in_flight_through_the_fault_ends_once(coordinator: Coordinator) -> None:
    """A handoff whose remote task is working when the database turns read-only for a few
    seconds is finished once the database is back: ACCEPTED, one remote task."""
    with httpx.Client(base_url=coordinator.url, headers=AUTHORIZED, timeout=30) as client:
        submitted = submit(client)
        assert submitted.status_code == 202, submitted.text
        store = coordinator.remote.state.task_store
        wait_for(lambda: len(store) == 1, 30, "the remote task to open")
        read_only(coordinator.database_files, True)
        try:
            time.sleep(4)
        finally:
            read_only(coordinator.database_files, False)
        run_id = submitted.json()["run_id"]
        accepted(client, run_id)
        assert client.get("/healthz").status_code == 200
    assert len(store) == 1, "sent once"
    events = Workspace(coordinator.data).ledger().events(run_id)
    kinds = Counter(event.event_type for event in events)
    print(json.dumps({"fault": "read-only 4 s, in flight", **{k: kinds[k] for k in COUNTED}}))
    # A send whose remote task id could not be stored is sent again under the same key
    # (the remote answers the task it has): at most one send per drive, one task in all.
    assert kinds["message.dispatched"] <= kinds["handoff.resumed"] + 1, kinds


def test_a_handoff_whose_deadline_passes_during_the_fault_times_out(
    coordinator: Coordinator,
) -> None:
    """The deadline falls inside the fault: once the database is back the handoff ends
    TIMED_OUT (its lease ran out), not FAILED for a token it could no longer mint."""
    with httpx.Client(base_url=coordinator.url, headers=AUTHORIZED, timeout=30) as client:
        submitted = submit(client, timeout=1)
        assert submitted.status_code == 202, submitted.text
        store = coordinator.remote.state.task_store
        wait_for(lambda: len(store) == 1, 30, "the remote task to open")
        read_only(coordinator.database_files, True)
        try:
            time.sleep(5)
        finally:
            read_only(coordinator.database_files, False)
        run_id = submitted.json()["run_id"]
        wait_for(lambda: run_state(client, run_id) in TERMINAL, 60, "the handoff to end")
        document = client.get(f"/v1/runs/{run_id}").json()
    [branch] = document["branches"]
    kinds = Counter(e.event_type for e in Workspace(coordinator.data).ledger().events(run_id))
    print(json.dumps({"fault": "read-only 5 s, deadline inside", **{k: kinds[k] for k in COUNTED}}))
    assert branch["state"] == "TIMED_OUT", branch
    assert branch["reason"].startswith("lease_expired"), branch
    assert len(store) == 1, "sent once"
