"""One task as a task store keeps it, and the pure rules both stores apply to it.

:class:`TaskRecord` is the stored task; callers get immutable :class:`Task` snapshots.
The rules here (moving a task to a state, who may resume or cancel it, how many finished
tasks a full store evicts, one page of ListTasks) do no I/O, so the in-memory store
(:mod:`member_kit.tasks.memory`) and the database store (:mod:`member_kit.tasks.sql`)
apply the same ones. Timestamps are ISO-8601 UTC with a trailing ``Z``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_cards.storage.ids import uuid7
from contracts import strict_json
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
from member_kit.tasks.pages import encode_page_token, wire_timestamp

Clock = Callable[[], datetime]
EvictionListener = Callable[[str, str], None]
"""``(owner, task_id)`` of a task the store evicted."""


def task_owner(iss: str, sub: str, tenant: str, handoff_id: str) -> str:
    """Whose a task is: the principal ``(iss, sub, tenant)`` of the grant it was opened
    under and the handoff that grant is bound to, as one JSON array. Every task operation
    is scoped by it (see :func:`member_kit.server.authorization.asked.owner_of`)."""
    return strict_json.dumps([iss, sub, tenant, handoff_id]).decode()


DEFAULT_PAGE_SIZE = 50
SETTLED_STATES = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
UNFINISHED = frozenset({TaskState.SUBMITTED, TaskState.WORKING})

new_id = uuid7
"""A new task, context, message or artifact id: time-ordered, so the rows and index
entries keyed by it (a task's, its idempotency key's, its receipt's log entry) append."""


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


def as_it_is(record: TaskRecord) -> TaskRecord:
    """A copy of ``record`` that later changes of it leave as it is now (its lists are
    its own, its ``settled`` event shared); cheaper than a :meth:`TaskRecord.snapshot`,
    which it can still give, and than ``dataclasses.replace``'s pass over every field."""
    copy: TaskRecord = object.__new__(TaskRecord)
    copy.__dict__.update(record.__dict__)
    copy.history, copy.artifacts = list(record.history), list(record.artifacts)
    return copy


def _last(messages: list[Message], count: int) -> list[Message]:
    return messages[-count:] if count > 0 else []


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


def page_size_of(query: ListTasksRequest) -> int:
    """How many tasks one ListTasks page holds: the caller's size, or the default."""
    return query.page_size or DEFAULT_PAGE_SIZE


def page_of(
    page: list[TaskRecord], more: bool, query: ListTasksRequest, total: int
) -> ListTasksResponse:
    """One ListTasks page of ``total`` matching tasks; ``more``: a next page exists."""
    return ListTasksResponse(
        tasks=[
            record.snapshot(query.history_length, bool(query.include_artifacts)) for record in page
        ],
        next_page_token=encode_page_token(page[-1].sort_key) if more else "",
        page_size=page_size_of(query),
        total_size=total,
    )
