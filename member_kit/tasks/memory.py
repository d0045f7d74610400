"""The in-memory task store: one process, gone on restart.

The rules it keeps (bounds, owner scoping, idempotency) are those of
:class:`member_kit.tasks.protocol.TaskStoreProtocol`; the database store
(:mod:`member_kit.tasks.sql`) keeps the same ones. Everything here runs on one event loop
and never awaits while changing state, so no lock is needed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Any, TypeVar

from agent_cards.clock import utc_now
from contracts.wire import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    TaskState,
)
from member_kit import errors
from member_kit.tasks.leases import DEFAULT_LEASE_SECONDS
from member_kit.tasks.pages import decode_page_token, parse_timestamp
from member_kit.tasks.protocol import BoundedStore
from member_kit.tasks.record import (
    UNFINISHED,
    Clock,
    TaskRecord,
    as_it_is,
    bound,
    check_cancelable,
    check_resumable,
    evictions_due,
    move,
    new_id,
    page_of,
    page_size_of,
    signal_settled,
)
from member_kit.tasks.retention import DEFAULT_RETENTION, KeyBook

T = TypeVar("T")


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
        record = self._new_record(owner, message, context_id, metadata, self._next_sequence())
        self._records[record.id] = record
        if idempotency_key is not None:
            self._keys.remember(owner, idempotency_key, record.id)
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
    ) -> TaskRecord | None:
        """Move a live task into ``through`` and on to ``state``; the task as it was in
        ``through`` (for its update), None if it is gone or already terminal."""
        if not self.advance(task_id, through):
            return None
        passed = as_it_is(self._records[task_id])
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
        page_size = page_size_of(query)
        after = decode_page_token(query.page_token) if query.page_token else None
        remaining = [r for r in matching if after is None or r.sort_key < after]
        return page_of(remaining[:page_size], len(remaining) > page_size, query, len(matching))

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
