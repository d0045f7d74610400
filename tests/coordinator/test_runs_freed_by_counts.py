"""A finished delegation is freed by its reference counts, not by the garbage collector.

A run, its book, its audit trail, its store and the drivers of its attempts used to hold
one another in reference cycles, so every record, message and task of a finished run
waited for the cyclic collector: under concurrent handoffs that was most of the
collector's work, 7-12% of the coordinator's CPU (docs/benchmarks.md, "No cycle a
run"). The links that closed the cycles are now held only while they are needed: the
book tells its run of changes through a weak reference, the trail holds its run only
while the run's state waits for the next flush, and a driver lets go of its retry
decision when the attempts are over. The last of these keeps what the cycle guaranteed:
a change to a run is written at its trail's next flush even if nothing else holds the
run any more.

A real remote_risk process answers; the delegations go through the coordinator's service
in this process, as ``federation delegate`` and the API run them.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.dispatch.attempt.send_modes import SendModes, send_modes
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.handoff.run import start_run
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, RemoteRiskProcess, registered

# What a run's objects are called: none of them may be left for the collector.
RUN_OBJECTS = {
    "Run",
    "HandoffBook",
    "AuditTrail",
    "RunStore",
    "HandoffDriver",
    "HandoffRecord",
    "RemoteOutcome",
}


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as running:
        yield running


async def _delegate(service: CoordinatorService, count: int) -> list[str]:
    agent = service.agent("remote-risk")
    order = DelegationOrder(agent=agent, skill="interpret-risk-policy", payload=PAYLOAD)
    async with A2AClient() as client:
        send_modes(client, lambda: SendModes(quick_seconds=3600.0))  # one blocking send
        service.client = client
        await service.delegate(order)  # the process's first: pools and heads warm
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept, to be read
        try:
            documents = await asyncio.gather(*(service.delegate(order) for _ in range(count)))
            gc.collect()
        finally:
            gc.set_debug(0)
    return [document["local_state"] for document in documents]


def test_finished_delegations_leave_nothing_for_the_collector(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    data, _ = remote
    ws = Workspace(data)
    try:
        states = asyncio.run(_delegate(CoordinatorService(ws), 4))
        left = sorted({type(o).__name__ for o in gc.garbage} & RUN_OBJECTS)
    finally:
        gc.garbage.clear()
        ws.close()
    assert states == ["ACCEPTED"] * 4
    assert left == []


def test_a_change_to_a_run_nothing_holds_is_written_at_the_next_flush(tmp_path: Path) -> None:
    """The run's state waits for its trail's flush; the trail holds the run until then."""
    ws = Workspace(DataDir(tmp_path / "data"))
    try:
        run = start_run(ws, "operator", kind="delegation")  # its first row waits
        run_id, store = run.run_id, run.store
        del run
        gc.collect()
        assert store.run(run_id) is not None  # a read flushes the store's trail first
    finally:
        ws.close()
