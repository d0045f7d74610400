"""Every change of a sent task is published, whether the skill's work is done by a
background worker or, for a blocking send whose skill answers at once, before the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from contracts.wire import SendMessageRequest, StreamResponse, TaskState
from member_kit.server.agent import AgentHandler
from member_kit.server.jsonrpc import CallContext
from member_kit.server.streams import TaskEventBroker, TaskUpdates
from member_kit.tasks.memory import TaskStore
from remote_risk.service import RiskSkill
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


async def send(handler: AgentHandler, data: Any, *, immediately: bool) -> Any:
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
    handler = AgentHandler(store, RiskSkill(), updates=TaskUpdates(TaskEventBroker(), recorder))
    task = asyncio.run(send(handler, risk_input(case), immediately=immediately))
    assert [described(event) for event in recorder.events] == published
    final = recorder.events[-1].status_update
    assert final is not None and store.get("alice", task.id).snapshot().status == final.status
    if not immediately:
        assert task.status == final.status


def test_a_blocking_send_with_a_slow_skill_still_waits_for_its_worker() -> None:
    """With a skill delay the work stays in the background and the send waits for it."""
    store = TaskStore(10)
    handler = AgentHandler(store, RiskSkill(), skill_delay_seconds=0.01)
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


class CommitFails(TaskStore):
    """An in-memory store whose transaction fails at its end, as a failed commit would."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield
        raise OSError("the commit failed")


class CommitWatched(TaskStore):
    """An in-memory store that notes in ``log`` when its transaction ends (commits)."""

    def __init__(self, capacity: int, log: list[str]) -> None:
        super().__init__(capacity)
        self.log = log

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield
        self.log.append("commit")


def test_nothing_is_published_when_the_sends_commit_fails() -> None:
    """A blocking send whose transaction does not commit announces none of its changes."""
    recorder = Recorder()
    handler = AgentHandler(
        CommitFails(10), RiskSkill(), updates=TaskUpdates(TaskEventBroker(), recorder)
    )
    with pytest.raises(OSError):
        asyncio.run(send(handler, risk_input(), immediately=False))
    assert recorder.events == []


def test_updates_are_published_after_the_sends_commit() -> None:
    """The changes of a blocking send are published once its transaction has committed."""
    log: list[str] = []

    class Logged(Recorder):
        def notify(self, owner: str, task_id: str, event: StreamResponse) -> None:
            log.append(described(event)[0])

    handler = AgentHandler(
        CommitWatched(10, log), RiskSkill(), updates=TaskUpdates(TaskEventBroker(), Logged())
    )
    asyncio.run(send(handler, risk_input(), immediately=False))
    assert log == ["commit", "status", "artifact", "status"]


def test_held_updates_are_dropped_on_an_error_and_published_in_order_otherwise() -> None:
    """``TaskUpdates.held`` keeps updates back until its block ends; a nested block joins
    the outer one."""
    recorder = Recorder()
    updates = TaskUpdates(TaskEventBroker(), recorder)
    task = (
        TaskStore(10)
        .create(
            "alice",
            SendMessageRequest.model_validate({"message": user_message(risk_input())}).message,
        )
        .snapshot()
    )
    with pytest.raises(LookupError), updates.held():
        updates.status("alice", task)
        raise LookupError
    assert recorder.events == []
    with updates.held():
        with updates.held():
            updates.status("alice", task)
        assert recorder.events == []
        updates.status("alice", task)
    assert [described(event) for event in recorder.events] == [("status", TaskState.SUBMITTED)] * 2
