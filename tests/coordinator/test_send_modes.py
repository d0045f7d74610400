"""A skill that answers at once is sent as one blocking SendMessage (issue 34, item 2).

The first handoff to a skill is sent returning at once and followed (streamed, as the
card of remote_risk allows); once one settled at once, the next is one blocking send whose
answer is the settled task: the coordinator observes the remote task only settled. A
skill whose handoffs take longer, or whose blocking answer is not settled, or whose send
failed, goes back to being followed. A real remote_risk process; the thresholds are the
modes' own (none of these assertions is on a duration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.wire import TaskState
from coordinator.dispatch.attempt.send_modes import SendModes, send_blocking, send_modes
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, RemoteRiskProcess, registered

SKILL = "interpret-risk-policy"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as running:
        yield running


def observed_states(remote: tuple[DataDir, RemoteRiskProcess], modes: SendModes) -> list[list[str]]:
    """The remote states the ledger holds for each of two delegations in a row, sent by one
    client whose send modes are ``modes``."""
    ws = Workspace(remote[0])
    try:
        service = CoordinatorService(ws)

        async def two() -> list[str]:
            order = DelegationOrder(
                agent=service.agent("remote-risk"), skill=SKILL, payload=PAYLOAD
            )
            async with A2AClient() as client:
                assert send_modes(client, lambda: modes) is modes
                service.client = client
                documents = [await service.delegate(order) for _ in range(2)]
            assert [d["local_state"] for d in documents] == ["ACCEPTED", "ACCEPTED"]
            return [d["run_id"] for d in documents]

        ledger = ws.ledger()
        return [
            [
                e.data["remote_state"]
                for e in ledger.events(run_id)
                if e.event_type == "remote.state_observed"
            ]
            for run_id in asyncio.run(two())
        ]
    finally:
        ws.close()


def test_once_a_skill_answered_at_once_it_is_sent_blocking(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    modes = SendModes(quick_seconds=3600.0)
    first, second = observed_states(remote, modes)
    completed = TaskState.COMPLETED.value
    assert first[0] != completed and first[-1] == completed  # followed as it worked
    assert second == [completed]  # one blocking send: only the settled task is seen


def test_a_skill_that_did_not_settle_at_once_is_followed_again(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    modes = SendModes(quick_seconds=0.0)
    for states in observed_states(remote, modes):
        assert states[0] != TaskState.COMPLETED.value and len(states) > 1


def test_what_is_learned_from_each_answer() -> None:
    modes = SendModes(quick_seconds=1.0)
    assert not modes.blocking("http://a", "s")  # never the first handoff
    modes.learned("http://a", "s", 0.01)
    assert modes.blocking("http://a", "s") and not modes.blocking("http://a", "other")
    modes.learned("http://a", "s", None)  # a blocking answer not settled, or a failed send
    assert not modes.blocking("http://a", "s")
    modes.learned("http://a", "s", 0.01)
    modes.learned("http://a", "s", 5.0)  # took longer than answering at once
    assert not modes.blocking("http://a", "s")


def test_a_blocking_send_waits_for_a_slot_only_as_long_as_a_quick_answer_takes() -> None:
    """With every plain-request slot taken, a skill that answers at once is still sent
    blocking when a slot frees within ``quick_seconds``, and followed (on a stream slot or
    by polling) when none does."""

    async def check() -> None:
        limits = ClientLimits(max_connections=2, max_streams=1)  # one plain-request slot
        async with A2AClient(limits=limits) as client:
            modes = send_modes(client, lambda: SendModes(quick_seconds=0.2))
            modes.learned("http://a", "s", 0.01)
            assert await send_blocking(client, "http://a", "s")
            async with client.request_slots:  # held past the wait
                assert not await send_blocking(client, "http://a", "s")
            await client.request_slots.acquire()  # held, and freed within the wait
            asyncio.get_running_loop().call_later(0.05, client.request_slots.release)
            assert await send_blocking(client, "http://a", "s")
            assert not client.request_slots.locked()  # the wait keeps no slot

    asyncio.run(check())


def test_more_handoffs_than_slots_to_a_quick_skill_are_all_sent_blocking(
    remote: tuple[DataDir, RemoteRiskProcess],
) -> None:
    """Eight handoffs at once through a client with two plain-request slots, to a skill
    that answered at once: each is one blocking send (the ledger sees only the settled
    task), none is streamed for want of a slot. A real remote_risk process."""
    ws = Workspace(remote[0])
    try:
        service = CoordinatorService(ws)
        order = DelegationOrder(agent=service.agent("remote-risk"), skill=SKILL, payload=PAYLOAD)

        async def many() -> list[str]:
            limits = ClientLimits(max_connections=4, max_streams=2)
            async with A2AClient(limits=limits) as client:
                send_modes(client, lambda: SendModes(quick_seconds=3600.0))
                service.client = client
                await service.delegate(order)  # the first is followed, and teaches
                documents = await asyncio.gather(*(service.delegate(order) for _ in range(8)))
            assert [d["local_state"] for d in documents] == ["ACCEPTED"] * 8
            return [d["run_id"] for d in documents]

        ledger = ws.ledger()
        for run_id in asyncio.run(many()):
            observed = [
                e.data["remote_state"]
                for e in ledger.events(run_id)
                if e.event_type == "remote.state_observed"
            ]
            assert observed == [TaskState.COMPLETED.value]
    finally:
        ws.close()
