"""A task's work is stopped only when another process really holds its lease.

Every third of a lease remote_risk renews the leases of the tasks it works on and stops
working those another process took over. A task that has just finished (its outcome
committed by its own worker, in another database thread, while the round renews) is not
renewed either, and it must not be taken for one taken over: its worker would be
cancelled after its commit, and the updates that commit announces (WORKING, the
artifact, COMPLETED) would never reach the streams following the task. The caller would
hear nothing more and have to fall back to polling.

The attack from outside: one real remote_risk process, on each backend, with a short
lease (a round every 0.17 s), and a burst of streamed delegations through the
coordinator's own delegate path. One process can have no task taken over by another.
"""

from __future__ import annotations

import asyncio
from contextlib import closing
from pathlib import Path

from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, registered

ROUNDS = 6
AT_ONCE = 12
TAKEN_OVER = "was taken over by another process"


async def delegate_bursts(service: CoordinatorService) -> list[dict[str, object]]:
    agent = service.agent("remote-risk")
    order = DelegationOrder(agent=agent, skill="interpret-risk-policy", payload=PAYLOAD)
    documents: list[dict[str, object]] = []
    async with A2AClient() as client:
        service.client = client
        for _ in range(ROUNDS):
            burst = [service.delegate(order) for _ in range(AT_ONCE)]
            documents.extend(await asyncio.gather(*burst))
    return documents


def test_a_task_that_just_finished_is_not_taken_for_one_taken_over(
    tmp_path: Path, database_url: str
) -> None:
    log = tmp_path / "remote-risk.log"
    lease = ("--task-lease-seconds", "0.5")
    with (
        registered(tmp_path, *lease, database_url=database_url, log=log) as (data, _),
        closing(Workspace(data)) as ws,
    ):
        documents = asyncio.run(delegate_bursts(CoordinatorService(ws)))
    assert {d["local_state"] for d in documents} == {"ACCEPTED"}
    wrongly_stopped = [line for line in log.read_text().splitlines() if TAKEN_OVER in line]
    assert wrongly_stopped == [], f"{len(wrongly_stopped)} tasks stopped as taken over"
