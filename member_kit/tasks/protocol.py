"""What the handler needs of a task store, and what both task stores share.

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
key is found again with :meth:`TaskStoreProtocol.find_by_idempotency_key` for the key's
retention window, also after the task was evicted (then as it ended), and refused as
expired after that window (see :mod:`member_kit.tasks.retention`).

:class:`member_kit.tasks.memory.TaskStore` keeps tasks in memory (one process, gone on
restart) and :class:`member_kit.tasks.sql.SQLTaskStore` keeps them in a database.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from contracts.wire import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    TaskState,
)
from member_kit.tasks.record import (
    Clock,
    EvictionListener,
    TaskRecord,
    bound,
    whole_milliseconds,
)

T = TypeVar("T")


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
    ) -> TaskRecord | None:
        """The task as it was in ``through`` (a copy, for its update: a snapshot is taken
        only if someone hears it), None if it is gone or already terminal."""
        ...

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

    def _new_record(
        self,
        owner: str,
        message: Message,
        context_id: str | None,
        metadata: dict[str, Any] | None,
        sequence: int,
    ) -> TaskRecord:
        """A new SUBMITTED task whose history starts with ``message`` (a new context
        unless ``context_id`` names one)."""
        record = TaskRecord(
            id=self._new_id(),
            owner=owner,
            context_id=context_id or self._new_id(),
            state=TaskState.SUBMITTED,
            changed_at=self._now(),
            sequence=sequence,
            metadata=metadata,
        )
        record.history.append(bound(message, record))
        return record
