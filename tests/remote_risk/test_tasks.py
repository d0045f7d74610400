"""The bounded, owner-scoped task store, driven directly with a controllable clock.

Every test runs against the in-memory store and the database store (SQLite, and
PostgreSQL when it is reachable): the two must behave alike.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contracts.wire import Artifact, ListTasksRequest, Message, Part, Role, TaskState
from member_kit import errors
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from member_kit.tasks.memory import TaskStore
from member_kit.tasks.protocol import TaskStoreProtocol
from member_kit.tasks.record import new_id
from member_kit.tasks.retention import DEFAULT_RETENTION
from member_kit.tasks.sql import SQLTaskStore

START = datetime(2026, 1, 31, 12, 0, 0, tzinfo=UTC)


class SteppingClock:
    """Each reading is one second after the previous one."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> datetime:
        return START + timedelta(seconds=next(self._ticks))


def message(text: str = "hello") -> Message:
    return Message(message_id=f"m-{text}", role=Role.USER, parts=[Part(text=text)])


StoreFactory = Callable[..., TaskStoreProtocol]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_with(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Makes an empty store of one kind with ``capacity``, a stepping clock and ids t1, t2..."""
    engines = []

    def make(capacity: int = 10, retention: timedelta = DEFAULT_RETENTION) -> TaskStoreProtocol:
        ids = (f"t{n}" for n in itertools.count(1))
        clock = SteppingClock()
        if request.param == "memory":
            return TaskStore(capacity, clock=clock, new_id=lambda: next(ids), retention=retention)
        if request.param == "sqlite":
            url = f"sqlite+pysqlite:///{tmp_path / f'tasks-{len(engines)}.db'}"
        else:
            url = request.getfixturevalue("postgres_url")
        engines.append(open_engine(url))
        migrate(engines[-1])
        return SQLTaskStore(
            engines[-1], capacity, clock=clock, new_id=lambda: next(ids), retention=retention
        )

    yield make
    for engine in engines:
        engine.dispose()


def finish(store: TaskStoreProtocol, task_id: str) -> None:
    assert store.advance(task_id, TaskState.COMPLETED)


def test_new_task_is_submitted_with_z_timestamp_and_bound_history(store_with: StoreFactory) -> None:
    """A created task is SUBMITTED, stamped in UTC with a trailing Z, its message bound to it."""
    store = store_with()
    record = store.create("alice", message())
    task = record.snapshot()
    assert task.status.state is TaskState.SUBMITTED
    assert task.status.timestamp == "2026-01-31T12:00:00.000Z"
    assert task.history is not None
    assert (task.history[0].task_id, task.history[0].context_id) == (task.id, task.context_id)


def test_full_store_evicts_oldest_terminal_task_first(store_with: StoreFactory) -> None:
    """At capacity, the terminal task whose status changed longest ago makes room."""
    store = store_with(capacity=3)
    first, second, live = (store.create("alice", message()).id for _ in range(3))
    finish(store, second)
    finish(store, first)
    store.create("alice", message())
    assert len(store) == 3
    with pytest.raises(errors.TaskNotFound):
        store.get("alice", second)
    assert store.get("alice", first).state is TaskState.COMPLETED
    assert store.get("alice", live).state is TaskState.SUBMITTED


def test_full_store_evicts_in_a_batch_down_to_its_low_water_mark(
    store_with: StoreFactory,
) -> None:
    """A full store of 20 evicts its two oldest terminal tasks at once (a tenth of its
    capacity), so the next new task finds room without evicting; capacity stays a hard
    bound, and every eviction is heard, once, with the task's owner."""
    store = store_with(capacity=20)
    heard: list[tuple[str, str]] = []
    store.on_eviction(lambda owner, task_id: heard.append((owner, task_id)))
    stored = [store.create("alice", message()).id for _ in range(20)]
    for task_id in stored:
        finish(store, task_id)
    store.create("alice", message())
    assert heard == [("alice", stored[0]), ("alice", stored[1])]
    assert len(store) == 19
    store.create("alice", message())
    assert len(store) == 20 and len(heard) == 2
    store.create("alice", message())
    assert heard[2:] == [("alice", stored[2]), ("alice", stored[3])]
    assert len(store) == 19
    with pytest.raises(errors.TaskNotFound):
        store.get("alice", stored[3])
    assert store.get("alice", stored[4]).state is TaskState.COMPLETED


def test_full_store_evicts_what_is_finished_when_less_than_its_batch(
    store_with: StoreFactory,
) -> None:
    """With fewer terminal tasks than a batch, those go and live tasks stay."""
    store = store_with(capacity=20)
    stored = [store.create("alice", message()).id for _ in range(20)]
    finish(store, stored[5])
    store.create("alice", message())
    assert len(store) == 20
    assert all(store.get("alice", task_id) for task_id in stored if task_id != stored[5])
    with pytest.raises(errors.TaskStoreFull):
        store.create("alice", message())


def test_store_full_of_live_tasks_refuses_new_ones(store_with: StoreFactory) -> None:
    """When every slot holds an unfinished task, a new task is refused, none is dropped."""
    store = store_with(capacity=2)
    kept = [store.create("alice", message()).id for _ in range(2)]
    with pytest.raises(errors.TaskStoreFull) as raised:
        store.create("alice", message())
    assert "2 task slots" in raised.value.message
    assert raised.value.kind.code == -32603
    assert [store.get("alice", task_id).id for task_id in kept] == kept


def test_other_owner_sees_not_found(store_with: StoreFactory) -> None:
    """A task of another owner answers exactly like a missing one, for read and cancel."""
    store = store_with()
    task_id = store.create("alice", message()).id
    with pytest.raises(errors.TaskNotFound) as read:
        store.get("mallory", task_id)
    with pytest.raises(errors.TaskNotFound) as cancel:
        store.cancel("mallory", task_id)
    with pytest.raises(errors.TaskNotFound) as missing:
        store.get("mallory", "no-such-task")
    assert read.value.message == f"task {task_id} was not found"
    assert cancel.value.message == read.value.message
    assert missing.value.message == "task no-such-task was not found"
    assert store.list("mallory", ListTasksRequest()).total_size == 0


def test_terminal_task_is_not_cancelable_and_stays_finished(store_with: StoreFactory) -> None:
    """Canceling a completed task fails, and a canceled task ignores late results."""
    store = store_with()
    done = store.create("alice", message()).id
    finish(store, done)
    with pytest.raises(errors.TaskNotCancelable):
        store.cancel("alice", done)
    live = store.create("alice", message()).id
    assert store.cancel("alice", live).state is TaskState.CANCELED
    assert not store.advance(live, TaskState.COMPLETED)
    assert store.get("alice", live).state is TaskState.CANCELED


def test_history_length_keeps_most_recent_messages(store_with: StoreFactory) -> None:
    """historyLength n keeps the last n messages, 0 omits history, None keeps all."""
    store = store_with()
    record = store.create("alice", message("one"))
    reply = message("two").model_copy(update={"role": Role.AGENT})
    store.advance(record.id, TaskState.INPUT_REQUIRED, message=reply)
    store.resume(record, message("three"))
    assert [m.message_id for m in record.snapshot().history or []] == ["m-one", "m-two", "m-three"]
    assert [m.message_id for m in record.snapshot(2).history or []] == ["m-two", "m-three"]
    assert record.snapshot(0).history is None


def test_resume_refuses_a_task_that_is_not_waiting_for_input(store_with: StoreFactory) -> None:
    """Only an interrupted task takes a further message."""
    store = store_with()
    record = store.create("alice", message())
    with pytest.raises(errors.UnsupportedOperation):
        store.resume(record, message("again"))


def test_list_sorts_newest_status_first_and_pages_with_opaque_tokens(
    store_with: StoreFactory,
) -> None:
    """Pages follow status timestamp desc, tokens chain pages, the last token is empty."""
    store = store_with()
    ids = [store.create("alice", message()).id for _ in range(5)]
    finish(store, ids[0])  # now the most recently changed
    store.create("bob", message())
    expected = [ids[0], ids[4], ids[3], ids[2], ids[1]]
    seen: list[str] = []
    token = None
    for _ in range(3):
        page = store.list("alice", ListTasksRequest(page_size=2, page_token=token))
        assert page.total_size == 5 and page.page_size == 2
        seen += [task.id for task in page.tasks]
        token = page.next_page_token
        if not token:
            break
        assert ids[0] not in token  # opaque: it names no task
    assert seen == expected
    assert token == ""


def test_list_defaults_and_filters(store_with: StoreFactory) -> None:
    """Default page size is 50, artifacts are left out unless asked, filters narrow the list."""
    store = store_with()
    first = store.create("alice", message(), context_id="ctx-a")
    second = store.create("alice", message(), context_id="ctx-b")
    finish(store, second.id)
    listed = store.list("alice", ListTasksRequest())
    assert listed.page_size == 50
    assert [t.id for t in store.list("alice", ListTasksRequest(context_id="ctx-a")).tasks] == [
        first.id
    ]
    completed = store.list("alice", ListTasksRequest(status=TaskState.COMPLETED))
    assert [t.id for t in completed.tasks] == [second.id]
    after = first.snapshot().status.timestamp
    recent = store.list("alice", ListTasksRequest(status_timestamp_after=after))
    assert [t.id for t in recent.tasks] == [second.id]
    assert all(task.artifacts is None for task in listed.tasks)


def test_bad_page_token_and_timestamp_are_invalid_params(store_with: StoreFactory) -> None:
    """A token this store did not issue and a non-ISO timestamp are refused as -32602."""
    store = store_with()
    store.create("alice", message())
    with pytest.raises(errors.InvalidParams, match="pageToken"):
        store.list("alice", ListTasksRequest(page_token="not-a-token"))
    with pytest.raises(errors.InvalidParams, match="statusTimestampAfter"):
        store.list("alice", ListTasksRequest(status_timestamp_after="yesterday"))


def test_wait_settled_returns_once_task_is_interrupted_or_terminal(
    store_with: StoreFactory,
) -> None:
    """A waiter wakes when the task reaches INPUT_REQUIRED, not while it is WORKING."""

    async def scenario() -> list[TaskState]:
        store = store_with()
        record = store.create("alice", message())
        waiter = asyncio.create_task(store.wait_settled(record))
        store.advance(record.id, TaskState.WORKING)
        await asyncio.sleep(0.01)
        states = [record.state] if not waiter.done() else []
        store.advance(record.id, TaskState.INPUT_REQUIRED)
        await asyncio.wait_for(waiter, 1)
        return [*states, record.state]

    assert asyncio.run(scenario()) == [TaskState.WORKING, TaskState.INPUT_REQUIRED]


def test_capacity_must_be_positive() -> None:
    """A store without room for any task is a configuration error."""
    with pytest.raises(ValueError):
        TaskStore(0)


def test_idempotency_key_outlives_the_eviction_of_its_task(store_with: StoreFactory) -> None:
    """A key finds the task created under it, for its owner only; once the task is evicted
    the key still answers it as it ended, and a send under it creates (and claims) nothing."""
    store = store_with(capacity=1)
    first = store.create("alice", message(), idempotency_key="run-1:h1")
    found = store.find_by_idempotency_key("alice", "run-1:h1")
    assert found is not None and found.id == first.id
    assert store.find_by_idempotency_key("bob", "run-1:h1") is None
    assert store.create("alice", message(), idempotency_key="run-1:h1").id == first.id
    assert len(store) == 1
    artifact = Artifact(artifact_id="a-1", parts=[Part(text="done")])
    assert store.advance(first.id, TaskState.COMPLETED, artifacts=[artifact])
    store.create("alice", message())  # the finished task makes room
    with pytest.raises(errors.TaskNotFound):
        store.get("alice", first.id)
    kept = store.find_by_idempotency_key("alice", "run-1:h1")
    assert kept is not None and kept.id == first.id
    assert kept.state is TaskState.COMPLETED and kept.artifacts == [artifact]
    claims: list[str] = []
    again = store.create(
        "alice", message(), idempotency_key="run-1:h1", claim=lambda: claims.append("x")
    )
    assert again.id == first.id and claims == [] and len(store) == 1


def test_a_key_past_its_retention_window_is_refused_not_redone(store_with: StoreFactory) -> None:
    """After the window (each clock reading here is one second on) the key is refused as
    expired, with a stable reason, whether or not its task is still stored; no task is
    created and no claim made."""
    store = store_with(capacity=10, retention=timedelta(seconds=5))
    first = store.create("alice", message(), idempotency_key="run-1:h1")
    answered = 0
    with pytest.raises(errors.IdempotencyKeyExpired) as refused:
        for _ in range(20):
            assert store.find_by_idempotency_key("alice", "run-1:h1") is not None
            answered += 1
    assert 0 < answered < 20
    assert refused.value.metadata == {"reason": "idempotency_key_expired", "retentionSeconds": "5"}
    claims: list[str] = []
    with pytest.raises(errors.IdempotencyKeyExpired):
        store.create(
            "alice", message(), idempotency_key="run-1:h1", claim=lambda: claims.append("x")
        )
    assert claims == [] and len(store) == 1 and store.get("alice", first.id).id == first.id


def test_claim_runs_only_when_a_task_is_created(store_with: StoreFactory) -> None:
    """The token's one-task claim is made for a new task only: not for a key's existing
    task, and not when the store has no room (so the token is not used up for nothing)."""
    store = store_with(capacity=1)
    claims: list[str] = []
    first = store.create("alice", message(), idempotency_key="k", claim=lambda: claims.append("1"))
    again = store.create("alice", message(), idempotency_key="k", claim=lambda: claims.append("2"))
    assert again.id == first.id
    with pytest.raises(errors.TaskStoreFull):
        store.create("alice", message(), claim=lambda: claims.append("3"))
    assert claims == ["1"]


def test_a_refused_claim_creates_no_task(store_with: StoreFactory) -> None:
    """A claim that raises (a replayed token) leaves nothing behind, not even its key."""
    store = store_with()

    def refuse() -> None:
        raise errors.InvalidParams("refused")

    with pytest.raises(errors.InvalidParams):
        store.create("alice", message(), idempotency_key="k", claim=refuse)
    assert len(store) == 0
    assert store.find_by_idempotency_key("alice", "k") is None


def test_advance_through_passes_a_state_on_the_way_in_one_change(
    store_with: StoreFactory,
) -> None:
    """The task as it was in the passed state is returned; the task ends in the final state
    with a later status; a finished task is not moved."""
    store = store_with()
    record = store.create("alice", message())
    reply = Message(message_id="m-reply", role=Role.AGENT, parts=[Part(text="need more")])
    passed = store.advance_through(
        record.id, TaskState.WORKING, TaskState.INPUT_REQUIRED, message=reply
    )
    assert passed is not None and passed.state is TaskState.WORKING
    assert passed.status_message is None and len(passed.history) == 1
    current = store.get("alice", record.id)
    assert current.state is TaskState.INPUT_REQUIRED
    assert current.status_message == reply and current.history[-1] == reply
    assert current.changed_at > passed.changed_at
    assert current.sequence == passed.sequence + 1
    finish(store, record.id)
    assert store.advance_through(record.id, TaskState.WORKING, TaskState.FAILED) is None
    assert store.get("alice", record.id).state is TaskState.COMPLETED


def test_new_ids_are_time_ordered_uuid7_text() -> None:
    """Task, context, artifact and message ids are RFC 9562 version 7 UUIDs in their usual
    text form: the millisecond they were made, then random bits; made in a later
    millisecond, an id sorts after."""
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert before <= parsed.int >> 80 <= after
    first = new_id()
    time.sleep(0.002)
    assert all(new_id() > first for _ in range(100))
