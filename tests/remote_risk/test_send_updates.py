"""Every change of a sent task is published, whether the skill's work is done by a
background worker or, for a blocking send whose skill answers at once, before the answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contracts.wire import SendMessageRequest, StreamResponse, TaskState
from remote_risk.handler import RiskAgentHandler
from remote_risk.jsonrpc import CallContext
from remote_risk.streams import TaskEventBroker, TaskUpdates
from remote_risk.tasks import TaskStore
from tests.remote_risk.conftest import risk_input, user_message

WORKING = TaskState.WORKING


class Recorder:
    """A notifier that keeps what it is told (a webhook for every task, if ``listening``)."""

    def __init__(self, listening: bool = True) -> None:
        self.events: list[StreamResponse] = []
        self.listening = listening

    def notify(self, owner: str, task_id: str, event: StreamResponse) -> None:
        self.events.append(event)

    def notifies(self, owner: str, task_id: str) -> bool:
        return self.listening


def described(event: StreamResponse) -> tuple[str, TaskState | None]:
    if event.status_update is not None:
        return ("status", event.status_update.status.state)
    assert event.artifact_update is not None
    return ("artifact", None)


async def send(handler: RiskAgentHandler, data: Any, *, immediately: bool) -> Any:
    request = SendMessageRequest.model_validate(
        {"message": user_message(data), "configuration": {"returnImmediately": immediately}}
    )
    response = await handler.send_message(request, CallContext(owner="alice"))
    await asyncio.sleep(0.05)  # a worker, if any, finishes
    return response.task


@pytest.mark.parametrize("immediately", [False, True])
@pytest.mark.parametrize(
    ("case", "published"),
    [
        ("ok", [("status", WORKING), ("artifact", None), ("status", TaskState.COMPLETED)]),
        ("missing", [("status", WORKING), ("status", TaskState.INPUT_REQUIRED)]),
    ],
)
def test_each_change_is_published_in_order(
    case: str, published: list[tuple[str, TaskState | None]], immediately: bool
) -> None:
    recorder = Recorder()
    store = TaskStore(10)
    handler = RiskAgentHandler(store, updates=TaskUpdates(TaskEventBroker(), recorder))
    task = asyncio.run(send(handler, risk_input(case), immediately=immediately))
    assert [described(event) for event in recorder.events] == published
    final = recorder.events[-1].status_update
    assert final is not None and store.get("alice", task.id).snapshot().status == final.status
    if not immediately:
        assert task.status == final.status


def test_a_blocking_send_with_a_slow_skill_still_waits_for_its_worker() -> None:
    """With a skill delay the work stays in the background and the send waits for it."""
    store = TaskStore(10)
    handler = RiskAgentHandler(store, skill_delay_seconds=0.01)
    task = asyncio.run(send(handler, risk_input(), immediately=False))
    assert task.status.state is TaskState.COMPLETED


def test_an_update_is_heard_by_a_stream_or_a_webhook() -> None:
    """Updates nobody receives need not be built; a stream or a webhook receives them."""
    broker = TaskEventBroker()
    assert not TaskUpdates(broker).heard("alice", "t1")
    assert not TaskUpdates(broker, Recorder(listening=False)).heard("alice", "t1")
    assert TaskUpdates(broker, Recorder()).heard("alice", "t1")
    subscription = broker.subscribe("t1")
    assert TaskUpdates(broker).heard("alice", "t1")
    assert not TaskUpdates(broker).heard("alice", "t2")
    subscription.close()
    assert not TaskUpdates(broker).heard("alice", "t1")
