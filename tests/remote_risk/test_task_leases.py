"""Work leases on unfinished tasks: two processes on one database never both hold one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from contracts.wire import Message, Part, Role, TaskState
from member_kit.tasks.sql import SQLTaskStore


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def engine(migrated_engine: Engine) -> Engine:
    return migrated_engine


def message() -> Message:
    return Message(message_id="m-1", role=Role.USER, parts=[Part(data={"brief": {}})])


def test_a_task_is_taken_over_only_once_its_lease_ran_out(engine: Engine) -> None:
    clock = Clock()
    first = SQLTaskStore(engine, 10, clock=clock, lease_seconds=2)
    second = SQLTaskStore(engine, 10, clock=clock, lease_seconds=2)
    task = first.create("alice", message())
    assert second.take_over(10) == [] and not second.claim(task.id)
    clock.now += timedelta(seconds=1)
    assert first.renew([task.id]) == set()  # renewed: good for 2 s from now
    clock.now += timedelta(seconds=1.5)
    assert second.take_over(10) == []
    clock.now += timedelta(seconds=1)
    [taken] = second.take_over(10)
    assert taken.id == task.id
    assert first.renew([task.id]) == {task.id} and not first.claim(task.id)  # taken over
    assert second.renew([task.id]) == set()


def test_a_released_or_finished_task_is_not_held_nor_taken_for_one_taken_over(
    engine: Engine,
) -> None:
    clock = Clock()
    first = SQLTaskStore(engine, 10, clock=clock, lease_seconds=2)
    second = SQLTaskStore(engine, 10, clock=clock, lease_seconds=2)
    kept = first.create("alice", message())
    done = first.create("alice", message())
    assert first.advance(done.id, TaskState.COMPLETED)
    first.release()
    assert [record.id for record in second.take_over(10)] == [kept.id]
    clock.now += timedelta(seconds=5)
    assert first.take_over(10)[0].id == kept.id
    assert first.advance(kept.id, TaskState.COMPLETED)
    assert first.renew([kept.id]) == set() and second.take_over(10) == []
    assert second.renew([kept.id]) == {kept.id}  # to the other process: held by another
