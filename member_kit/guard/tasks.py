"""Whose each upstream task is, and the handoff binding it was opened under.

The upstream knows nothing of owners or handoffs, so the guard keeps, for every task it saw
opened, the owner of the token that opened it
(:func:`~member_kit.server.authorization.asked.owner_of`: principal and handoff) and the
metadata the kit's own handler would have given it (the handoff binding and what the token
binds, :func:`~member_kit.server.messages.opened_metadata`). A task of another owner reads
as not found, as in the kit's task stores.

Calls made inside :meth:`TaskOwners.transaction` are kept together with whatever else is
written there (a send's task with its receipt).

A task opened under an idempotency key (``metadata.idempotencyKey`` of its message) is
found again by its owner and key, so that a send retried under the same key is answered
with the task it opened instead of opening another (:meth:`GuardedTasks.opened_under`).

At most ``capacity`` tasks are kept, the oldest forgotten first (with its key); a task
forgotten reads as not found. :class:`GuardedTasks` keeps them in memory (a guard without
a database); :class:`~member_kit.guard.sql_tasks.SQLGuardedTasks` in the guard's database,
across a restart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from member_kit import errors


@dataclass(frozen=True)
class GuardedTask:
    owner: str
    metadata: Mapping[str, Any]
    idempotency_key: str | None = None


class TaskOwners(Protocol):
    """What the forwarding handler and the authorizer ask of the record of tasks."""

    capacity: int
    # What a failed :meth:`transaction` raises (its begin or commit), none in memory.
    storage_errors: tuple[type[Exception], ...]

    def __len__(self) -> int: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def remember(
        self,
        task_id: str,
        owner: str,
        metadata: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> GuardedTask: ...

    def opened_under(self, owner: str, idempotency_key: str) -> str | None: ...

    def get(self, owner: str, task_id: str) -> GuardedTask: ...

    def owned_by(self, owner: str, limit: int) -> list[str]: ...

    def metadata_of(self, task_id: str) -> Mapping[str, Any]: ...

    def binding(self, owner: str, task_id: str) -> Mapping[str, Any] | None: ...


def check_same_owner(known: GuardedTask, owner: str) -> GuardedTask:
    """A task already another owner's stays theirs: an upstream that names the same task
    to two callers is answered as failing."""
    if known.owner != owner:
        raise errors.UpstreamFailure(
            "upstream_task_reused", "the upstream answered with another caller's task"
        )
    return known


class OwnerRules:
    """The rules both records apply over one lookup of a task by id (:meth:`find`): a
    task of another owner reads as not found."""

    def find(self, task_id: str) -> GuardedTask | None:
        raise NotImplementedError

    def get(self, owner: str, task_id: str) -> GuardedTask:
        """``owner``'s task ``task_id``, else :class:`~member_kit.errors.TaskNotFound`."""
        known = self.find(task_id)
        if known is None or known.owner != owner:
            raise errors.TaskNotFound(task_id)
        return known

    def metadata_of(self, task_id: str) -> Mapping[str, Any]:
        """The metadata a listed task (one of ``owned_by``) was opened with."""
        known = self.find(task_id)
        return known.metadata if known is not None else {}

    def binding(self, owner: str, task_id: str) -> Mapping[str, Any] | None:
        """The :data:`~member_kit.server.authorization.asked.TaskBinding` the authorizer checks a
        continuation against (None: no such task of this owner)."""
        known = self.find(task_id)
        return known.metadata if known is not None and known.owner == owner else None


class GuardedTasks(OwnerRules):
    """A bounded map of upstream task id to :class:`GuardedTask`."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.storage_errors: tuple[type[Exception], ...] = ()
        self._tasks: OrderedDict[str, GuardedTask] = OrderedDict()
        self._keys: dict[tuple[str, str], str] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def transaction(self) -> AbstractContextManager[None]:
        """Nothing to hold together in memory: each call is whole when it returns."""
        return nullcontext()

    def remember(
        self,
        task_id: str,
        owner: str,
        metadata: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> GuardedTask:
        """Keep ``task_id`` as ``owner``'s (opened under ``idempotency_key``, if any); a
        task already another owner's stays theirs (an upstream that names the same task
        twice is answered as failing)."""
        known = self._tasks.get(task_id)
        if known is not None:
            return check_same_owner(known, owner)
        self._tasks[task_id] = GuardedTask(owner, dict(metadata), idempotency_key)
        if idempotency_key is not None:
            self._keys[(owner, idempotency_key)] = task_id
        while len(self._tasks) > self.capacity:
            _, forgotten = self._tasks.popitem(last=False)
            if forgotten.idempotency_key is not None:
                self._keys.pop((forgotten.owner, forgotten.idempotency_key), None)
        return self._tasks[task_id]

    def opened_under(self, owner: str, idempotency_key: str) -> str | None:
        """The id of ``owner``'s task opened under ``idempotency_key``, if one is kept."""
        return self._keys.get((owner, idempotency_key))

    def owned_by(self, owner: str, limit: int) -> list[str]:
        """The ids of ``owner``'s tasks, most recently opened first, at most ``limit``."""
        owned = (task_id for task_id, task in reversed(self._tasks.items()) if task.owner == owner)
        return [task_id for task_id, _ in zip(owned, range(limit), strict=False)]

    def find(self, task_id: str) -> GuardedTask | None:
        return self._tasks.get(task_id)
