"""A bounded, owner-scoped, in-memory store of A2A tasks and their lifecycle.

Bounds: at most ``capacity`` tasks are kept. A new task that finds the store full evicts
the terminal tasks whose status changed longest ago, down to a low-water mark
``eviction_headroom(capacity)`` below capacity (a tenth of it, at least one task), so a
busy store evicts in batches rather than on every new task; when fewer terminal tasks
exist, all of them go. If every stored task is still unfinished the new one is refused
with :class:`~member_kit.errors.TaskStoreFull` rather than dropping live work. Whoever
keeps something per task (push configs) hears of each eviction through
:meth:`TaskStoreProtocol.on_eviction`.

Scoping: every read, list and cancel takes the caller's ``owner``; a task of another owner
answers exactly as a missing one does, so existence never leaks across owners.

Idempotency: a task may be created under an ``idempotency_key``; the owner's task for a
key is found again with :meth:`TaskStore.find_by_idempotency_key` for the key's retention
window, also after the task was evicted (then as it ended), and refused as expired after
that window (see :mod:`member_kit.tasks.retention`).

:class:`TaskStoreProtocol` is the interface the handler uses; :class:`TaskStore` keeps
tasks in memory (one process, gone on restart) and
:class:`member_kit.tasks.sql.SQLTaskStore` keeps them in a database.

Everything here runs on one event loop and never awaits while changing state, so no lock
is needed. Timestamps are ISO-8601 UTC with a trailing ``Z``.
"""

from __future__ import annotations

import asyncio
import heapq
import uuid
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from agent_cards.clock import utc_now
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Task,
    TaskState,
    TaskStatus,
)
from member_kit import errors
from member_kit.tasks.leases import DEFAULT_LEASE_SECONDS
from member_kit.tasks.pages import (
    decode_page_token as decode_page_token,
)
from member_kit.tasks.pages import (
    encode_page_token as encode_page_token,
)
from member_kit.tasks.pages import (
    parse_timestamp as parse_timestamp,
)
from member_kit.tasks.pages import (
    wire_timestamp as wire_timestamp,
)
from member_kit.tasks.retention import DEFAULT_RETENTION, KeyBook

T = TypeVar("T")

Clock = Callable[[], datetime]
EvictionListener = Callable[[str, str], None]
"""``(owner, task_id)`` of a task the store evicted."""
DEFAULT_PAGE_SIZE = 50
SETTLED_STATES = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
UNFINISHED = frozenset({TaskState.SUBMITTED, TaskState.WORKING})


def new_id() -> str:
    """A random (version 4) UUID in its usual text form."""
    return str(uuid.uuid4())


@dataclass
class TaskRecord:
    """One task as the store keeps it; callers get immutable :class:`Task` snapshots."""

    id: str
    owner: str
    context_id: str
    state: TaskState
    changed_at: datetime
    sequence: int
    status_message: Message | None = None
    history: list[Message] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_TASK_STATES

    @property
    def sort_key(self) -> tuple[datetime, int]:
        """Newest status change first; the sequence breaks ties between equal timestamps."""
        return (self.changed_at, self.sequence)

    def snapshot(self, history_length: int | None = None, include_artifacts: bool = True) -> Task:
        """The wire view; ``history_length`` keeps the most recent messages (None: all)."""
        history = self.history if history_length is None else _last(self.history, history_length)
        return Task(
            id=self.id,
            context_id=self.context_id,
            status=TaskStatus(
                state=self.state,
                message=self.status_message,
                timestamp=wire_timestamp(self.changed_at),
            ),
            artifacts=list(self.artifacts) if include_artifacts and self.artifacts else None,
            history=list(history) if history else None,
            metadata=dict(self.metadata) if self.metadata else None,
        )


def _last(messages: list[Message], count: int) -> list[Message]:
    return messages[-count:] if count > 0 else []


class TaskStoreProtocol(Protocol):
    """What the handler needs of a task store; every read is scoped by ``owner``."""

    capacity: int

    def __len__(self) -> int: ...

    def create(
        self,
        owner: str,
        message: Message,
        context_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        claim: Callable[[], None] | None = None,
    ) -> TaskRecord: ...

    def transaction(self) -> AbstractContextManager[None]:
        """Changes made inside are stored together, or none of them."""
        ...

    async def run_transaction(self, work: Callable[[], T]) -> T:
        """``work()`` inside :meth:`transaction`, without holding the event loop while
        the database is busy; its result."""
        ...

    def find_by_idempotency_key(self, owner: str, key: str) -> TaskRecord | None: ...

    def resume(self, record: TaskRecord, message: Message) -> None: ...

    def advance(
        self,
        task_id: str,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> bool: ...

    def advance_through(
        self,
        task_id: str,
        through: TaskState,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> Task | None: ...

    def cancel(self, owner: str, task_id: str) -> TaskRecord: ...

    def on_eviction(self, listener: EvictionListener) -> None:
        """Call ``listener`` for every task evicted from now on, once its eviction is stored."""
        ...

    # Work leases (see member_kit.tasks.leases): who works an unfinished task.
    lease_seconds: float

    def renew(self, task_ids: Collection[str]) -> set[str]:
        """Renew this process's leases on the tasks it works on; those of them another
        process took over (not those that finished meanwhile)."""
        ...

    def claim(self, task_id: str) -> bool:
        """Take the work lease of an unfinished task unless another live process holds it."""
        ...

    def take_over(self, limit: int) -> list[TaskRecord]:
        """Lease (and return) up to ``limit`` unfinished tasks whose lease ran out."""
        ...

    def release(self) -> None:
        """Give this process's leases back, so another process resumes at once."""
        ...

    async def wait_settled(self, record: TaskRecord) -> None: ...

    def get(self, owner: str, task_id: str) -> TaskRecord: ...

    def list(self, owner: str, query: ListTasksRequest) -> ListTasksResponse: ...


class BoundedStore:
    """What both task stores share: the capacity, the clock and ids, and telling the
    listeners registered with :meth:`on_eviction` which tasks went."""

    def __init__(self, capacity: int, clock: Clock, new_id: Callable[[], str]) -> None:
        if capacity < 1:
            raise ValueError("a task store needs room for at least one task")
        self.capacity = capacity
        self._clock = clock
        self._new_id = new_id
        self._eviction_listeners: list[EvictionListener] = []

    def on_eviction(self, listener: EvictionListener) -> None:
        self._eviction_listeners.append(listener)

    def _announce(self, evicted: list[tuple[str, str]]) -> None:
        for owner, task_id in evicted:
            for listener in self._eviction_listeners:
                listener(owner, task_id)

    def _now(self) -> datetime:
        return whole_milliseconds(self._clock())


class TaskStore(BoundedStore):
    """The in-memory :class:`TaskStoreProtocol`."""

    def __init__(
        self,
        capacity: int,
        *,
        clock: Clock = utc_now,
        new_id: Callable[[], str] = new_id,
        retention: timedelta = DEFAULT_RETENTION,
    ) -> None:
        super().__init__(capacity, clock, new_id)
        self._records: dict[str, TaskRecord] = {}
        self._keys: KeyBook[TaskRecord] = KeyBook(retention, self._now)
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._records)

    # --- lifecycle ------------------------------------------------------------------------

    def create(
        self,
        owner: str,
        message: Message,
        context_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        claim: Callable[[], None] | None = None,
    ) -> TaskRecord:
        """Open a SUBMITTED task whose history starts with ``message``; ``metadata`` is the
        task's own (e.g. the handoff it serves). With an ``idempotency_key`` the owner's
        task for that key is returned instead if there is one. ``claim`` (the delegation
        token's one-task claim) runs only when a task is created, once nothing else can
        stop it: if it raises, nothing is created."""
        if idempotency_key is not None:
            existing = self.find_by_idempotency_key(owner, idempotency_key)
            if existing is not None:
                return existing
        self._make_room()
        if claim is not None:
            claim()
        task_id = self._new_id()
        record = TaskRecord(
            id=task_id,
            owner=owner,
            context_id=context_id or self._new_id(),
            state=TaskState.SUBMITTED,
            changed_at=self._now(),
            sequence=self._next_sequence(),
            metadata=metadata,
        )
        record.history.append(bound(message, record))
        self._records[task_id] = record
        if idempotency_key is not None:
            self._keys.remember(owner, idempotency_key, task_id)
        return record

    def transaction(self) -> AbstractContextManager[None]:
        """Nothing to group in memory: each change is complete when its call returns."""
        return nullcontext()

    async def run_transaction(self, work: Callable[[], T]) -> T:
        """In memory nothing waits: ``work()`` inside :meth:`transaction`, here and now."""
        with self.transaction():
            return work()

    def find_by_idempotency_key(self, owner: str, key: str) -> TaskRecord | None:
        """The owner's task created under ``key`` (as it ended, if it was evicted) while
        the key is retained; raises IdempotencyKeyExpired after its retention window."""
        entry = self._keys.lookup(owner, key)
        if entry is None:
            return None
        return self._records.get(entry.task_id) or entry.retained

    def resume(self, record: TaskRecord, message: Message) -> None:
        """Take a further message for an interrupted task and submit it again."""
        check_resumable(record)
        record.history.append(bound(message, record))
        self._move(record, TaskState.SUBMITTED, None)

    def advance(
        self,
        task_id: str,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> bool:
        """Move a live task on; False if it is gone or already terminal (e.g. cancelled)."""
        record = self._records.get(task_id)
        if record is None or record.terminal:
            return False
        if artifacts:
            record.artifacts.extend(artifacts)
        self._move(record, state, message)
        return True

    def advance_through(
        self,
        task_id: str,
        through: TaskState,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> Task | None:
        """Move a live task into ``through`` and on to ``state``; the task as it was in
        ``through`` (for its update), None if it is gone or already terminal."""
        if not self.advance(task_id, through):
            return None
        passed = self._records[task_id].snapshot()
        self.advance(task_id, state, message, artifacts)
        return passed

    def cancel(self, owner: str, task_id: str) -> TaskRecord:
        record = self.get(owner, task_id)
        check_cancelable(record)
        self._move(record, TaskState.CANCELED, None)
        return record

    async def wait_settled(self, record: TaskRecord) -> None:
        """Return once the task is terminal or waiting for input or authorization."""
        await record.settled.wait()

    # --- work leases: one process holds every task kept in its memory ----------------------

    lease_seconds = DEFAULT_LEASE_SECONDS

    def renew(self, task_ids: Collection[str]) -> set[str]:
        return set()  # no other process sees this memory

    def claim(self, task_id: str) -> bool:
        record = self._records.get(task_id)
        return record is not None and record.state in UNFINISHED

    def take_over(self, limit: int) -> list[TaskRecord]:
        return []  # nothing outlives the process that held it

    def release(self) -> None:
        return None

    # --- reading --------------------------------------------------------------------------

    def get(self, owner: str, task_id: str) -> TaskRecord:
        record = self._records.get(task_id)
        if record is None or record.owner != owner:
            raise errors.TaskNotFound(task_id)
        return record

    def list(self, owner: str, query: ListTasksRequest) -> ListTasksResponse:
        """The owner's tasks matching ``query``, newest status change first, one page."""
        changed_after = parse_timestamp(query.status_timestamp_after, "statusTimestampAfter")
        matching = sorted(
            (
                record
                for record in self._records.values()
                if _matches(record, owner, query, changed_after)
            ),
            key=lambda record: record.sort_key,
            reverse=True,
        )
        page_size = query.page_size or DEFAULT_PAGE_SIZE
        after = decode_page_token(query.page_token) if query.page_token else None
        remaining = [r for r in matching if after is None or r.sort_key < after]
        page = remaining[:page_size]
        more = len(remaining) > page_size
        return ListTasksResponse(
            tasks=[
                record.snapshot(query.history_length, bool(query.include_artifacts))
                for record in page
            ],
            next_page_token=encode_page_token(page[-1].sort_key) if more else "",
            page_size=page_size,
            total_size=len(matching),
        )

    # --- internals ------------------------------------------------------------------------

    def _move(self, record: TaskRecord, state: TaskState, message: Message | None) -> None:
        move(record, state, message, self._now(), self._next_sequence())
        signal_settled(record)

    def _make_room(self) -> None:
        stored = len(self._records)
        if stored < self.capacity:
            return
        finished = (record for record in self._records.values() if record.terminal)
        oldest = heapq.nsmallest(
            evictions_due(stored, self.capacity), finished, key=lambda record: record.sort_key
        )
        if not oldest:
            raise errors.TaskStoreFull(self.capacity)
        for record in oldest:
            del self._records[record.id]
            self._keys.retain(record.id, record)
        self._announce([(record.owner, record.id) for record in oldest])

    def _next_sequence(self) -> int:
        self._sequence += 1
        return self._sequence


def eviction_headroom(capacity: int) -> int:
    """How far below ``capacity`` a full store evicts: a tenth of it, at least one task."""
    return max(1, capacity // 10)


def evictions_due(stored: int, capacity: int) -> int:
    """How many terminal tasks a store holding ``stored`` evicts to make room for one more."""
    return max(0, stored - capacity + eviction_headroom(capacity))


def whole_milliseconds(at: datetime) -> datetime:
    """``at`` in whole milliseconds, so the order matches the timestamps shown."""
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def move(
    record: TaskRecord, state: TaskState, message: Message | None, at: datetime, sequence: int
) -> None:
    """Put ``record`` into ``state`` at ``at``; a status message also joins the history."""
    record.state = state
    record.status_message = message
    record.changed_at = at
    record.sequence = sequence
    if message is not None:
        record.history.append(message)


def signal_settled(record: TaskRecord) -> None:
    """Wake waiters once the task is terminal or interrupted; re-arm while it is live."""
    if record.state in SETTLED_STATES:
        record.settled.set()
    else:
        record.settled.clear()


def check_resumable(record: TaskRecord) -> None:
    if record.state not in INTERRUPTED_TASK_STATES:
        raise errors.UnsupportedOperation(
            f"task {record.id} is {record.state.value}; only a task waiting for input "
            "takes a further message"
        )


def check_cancelable(record: TaskRecord) -> None:
    if record.terminal:
        raise errors.TaskNotCancelable(
            f"task {record.id} is already {record.state.value} and cannot be canceled",
            metadata={"taskId": record.id, "state": record.state.value},
        )


def bound(message: Message, record: TaskRecord) -> Message:
    """The message as stored: tied to its task and context."""
    return message.model_copy(update={"task_id": record.id, "context_id": record.context_id})


def _matches(
    record: TaskRecord, owner: str, query: ListTasksRequest, changed_after: datetime | None
) -> bool:
    if record.owner != owner:
        return False
    if query.context_id and record.context_id != query.context_id:
        return False
    if query.status and query.status is not TaskState.UNSPECIFIED and record.state != query.status:
        return False
    return changed_after is None or record.changed_at > changed_after
