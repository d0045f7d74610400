"""A blocking SendMessage to a real remote_risk goes through the small keep-alive client.

Two delegations in a row by one client (issue 34, item 2): the first is followed (its
stream is read through httpx), the second is one blocking ``SendMessage``, and that send
is the one request the client's keep-alive pool carried for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.wire import TaskState
from coordinator.dispatch.attempt.send_modes import SendModes, send_modes
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, RemoteRiskProcess, registered


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as running:
        yield running


def test_a_blocking_send_is_carried_by_the_keepalive_client(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    ws = Workspace(remote[0])
    try:
        service = CoordinatorService(ws)
        order = DelegationOrder(
            agent=service.agent("remote-risk"), skill="interpret-risk-policy", payload=PAYLOAD
        )

        async def two() -> tuple[str, int]:
            async with A2AClient() as client:
                send_modes(client, lambda: SendModes(quick_seconds=3600.0))
                service.client = client
                pool = client.keepalive
                assert pool is not None
                await service.delegate(order)  # followed: the skill is learned quick
                before = pool.requests
                second = await service.delegate(order)
                assert second["local_state"] == "ACCEPTED"
                return second["run_id"], pool.requests - before

        run_id, carried = asyncio.run(two())
        observed = [
            e.data["remote_state"]
            for e in ws.ledger().events(run_id)
            if e.event_type == "remote.state_observed"
        ]
    finally:
        ws.close()
    assert observed == [TaskState.COMPLETED.value]  # one blocking send, answered settled
    assert carried == 1  # and it was the keep-alive client's one request
