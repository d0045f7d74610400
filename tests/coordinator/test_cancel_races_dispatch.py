"""A cancel that lands while a worker is about to send: the message never leaves.

`federation worker` (a real process) claims a submitted handoff and stops just before its
intent point, the durable point after which the message leaves; meanwhile `federation
cancel` (another process) cancels the run. When the worker goes on, the store refuses
its intent over the ended row: it adopts the cancellation, sends nothing, and the remote
holds no task. Before, the store skipped the stale write silently and the message left.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.dispatch.delegate import DelegationOrder
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.storage.engine import DATABASE_FILE
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, registered, wait_for


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as running:
        yield running


def remote_tasks(process: RemoteRiskProcess) -> int:
    with sqlite3.connect(process.data_dir / DATABASE_FILE) as connection:
        (count,) = connection.execute("SELECT count(*) FROM remote_risk_tasks").fetchone()
    return int(count)


def test_a_cancel_before_the_intent_point_keeps_the_message_home(
    remote: tuple[DataDir, RemoteRiskProcess], tmp_path: Path
) -> None:
    data, process = remote
    ws = Workspace(data)
    service = CoordinatorService(ws)
    order = DelegationOrder(
        agent=service.agent("remote-risk"), skill="interpret-risk-policy", payload=PAYLOAD
    )
    submitted = service.submit(order)
    marker = tmp_path / "paused-before_intent"
    worker = federation(
        data.root,
        "worker",
        "--lease-seconds",
        "2",
        FEDERATION_PAUSE_AT="before_intent",
        FEDERATION_PAUSE_MARKER=str(marker),
    )
    try:
        wait_for(marker.exists, 30, "the worker to reach its intent point")
        cancelled = federation(data.root, "cancel", submitted.run_id, "--reason", "race")
        assert cancelled.wait(timeout=60) == 0, cancelled.communicate()
        marker.unlink()  # the worker goes on
        store = ws.run_store()

        def settled() -> bool:
            stored = store.handoff(submitted.attempt_id)
            return stored is not None and stored[0].state.value == "CANCELLED"

        wait_for(settled, 30, "the handoff to stay cancelled")
        time.sleep(2.0)  # what the worker would have sent, it would have sent by now
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
    events = [e.event_type for e in ws.ledger().events(submitted.run_id)]
    ws.close()
    assert remote_tasks(process) == 0, "the message of a cancelled handoff left"
    assert "message.dispatched" not in events
    # the cancellation, and the worker adopting it; no dispatch of the handoff
    assert "run.cancelled" in events and events[-1] == "handoff.ended_elsewhere", events
