"""What one governed handoff costs the coordinator, counted (issue 20, items 1-2).

A real remote_risk process; the coordinator's delegation path (the service's ``delegate``,
as `federation delegate` and the API's ``wait: true`` call it) in this process, so its
database work can be watched statement by statement. A completed handoff must be two
durable points (the intent before the message leaves, the outcome after), no statement
may run on the event loop's thread except the one read of the handoff's row before a
result is admitted, and the ledger must still hold every fact it held before.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from coordinator.dispatch.attempt.send_modes import SendModes, send_modes
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import writer_of
from coordinator.storage.schema import tree_heads
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, RemoteRiskProcess, registered

# Serial: it counts the writer's durable points for six concurrent handoffs, a count that
# depends on how the remote's replies fall in time. Beside other tests on the same cores
# (a full run under -n 2 on a loaded machine) it came out 14, not 12; alone it holds.
pytestmark = pytest.mark.serial

HANDOFFS = 6
# Every fact one completed delegation leaves in the ledger (before and after the durable
# points were merged: merging them must drop none). Its skill answered at once before, so
# it is one blocking send (coordinator.dispatch.attempt.send_modes): the remote task is observed
# once, settled, and the handoff goes from DISPATCHED to RETURNED without RUNNING. Its
# budget units ride on its admission and on the move that ended it, and its three moves
# (to DISPATCHED, RETURNED and ACCEPTED) on the dispatch, the remote state observed and
# the artifact's verdict that caused them: no handoff.transition of its own
# (tests/coordinator/test_facts_ride_on_their_events.py); the remote's receipt rides on
# that verdict too (no handoff.receipt of its own), and its admission and what is shown
# of the token it was sent with on its dispatch (no handoff.admitted or grant.minted of
# its own).
FACTS_PER_DELEGATION = {
    "run.started": 1,
    "message.dispatched": 1,
    "remote.state_observed": 1,
    "artifact.admitted": 1,
    "run.disposition": 1,
}


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as running:
        yield running


class Statements:
    """Every statement the coordinator's engine runs, by the thread that ran it."""

    def __init__(self) -> None:
        self.on_loop: list[str] = []
        self.loop_thread: int | None = None
        self.points = 0  # durable points the writer committed
        self.waits = 0  # times a caller waited in place for the writer

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(" ".join(statement.split())[:80])


async def delegate_all(service: CoordinatorService, statements: Statements) -> list[str]:
    statements.loop_thread = threading.get_ident()
    agent = service.agent("remote-risk")
    order = DelegationOrder(agent=agent, skill="interpret-risk-policy", payload=PAYLOAD)
    async with A2AClient() as client:
        # however long the first takes on a busy machine, its skill counts as answering at once
        send_modes(client, lambda: SendModes(quick_seconds=3600.0))
        service.client = client
        await service.delegate(order)  # the first: the process's first head, pools warm
        statements.on_loop.clear()
        writer = writer_of(service.ws.engine())
        before = Counter(writer.batch_sizes)
        waits = writer.waits_in_place
        documents = await asyncio.gather(*(service.delegate(order) for _ in range(HANDOFFS)))
        points = writer.batch_sizes - before
        statements.points = sum(size * count for size, count in points.items())
        statements.waits = writer.waits_in_place - waits
        statements.loop_thread = None
    assert {d["local_state"] for d in documents} == {"ACCEPTED"}
    return [d["run_id"] for d in documents]


def test_a_completed_handoff_is_two_durable_points_and_no_loop_statement_but_one(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    data, _ = remote
    ws = Workspace(data)
    statements = Statements()
    event.listen(ws.engine(), "before_cursor_execute", statements)
    try:
        run_ids = asyncio.run(delegate_all(CoordinatorService(ws), statements))
        ledger = ws.ledger()
        for run_id in run_ids:
            facts = Counter(e.event_type for e in ledger.events(run_id))
            assert facts == FACTS_PER_DELEGATION, run_id
        with ws.engine().connect() as connection:
            witnessed = connection.execute(
                select(tree_heads.c.id).where(tree_heads.c.origin == "witnessed")
            ).all()
        assert len(witnessed) == HANDOFFS + 1  # each receipt's remote head is kept
    finally:
        event.remove(ws.engine(), "before_cursor_execute", statements)
        ws.close()

    assert statements.points == 2 * HANDOFFS
    assert statements.waits == 0
    reads = [s for s in statements.on_loop if s.startswith("SELECT")]
    # a read's transaction is begun like any other (SQLite: BEGIN DEFERRED, no lock taken)
    others = [s for s in statements.on_loop if not s.startswith(("SELECT", "BEGIN DEFERRED"))]
    assert others == [], "the event loop wrote to the database"
    assert len(reads) <= HANDOFFS, reads
