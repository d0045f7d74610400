"""The guard's record of whose each upstream task is, in its database: kept across a
restart, so that a coordinator polling its task, or resending a handoff under the same
idempotency key, is answered by a restarted guard as it was before.

The same rules as :class:`~member_kit.guard.tasks.GuardedTasks` (the same tests run
against both): a task of another owner reads as not found, a task already another
owner's stays theirs, at most ``capacity`` are kept and the oldest go first. Each call
is one short transaction; two guards on one database that record the same task at once
agree through the table's unique constraints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from member_kit import errors
from member_kit.guard.tasks import GuardedTask, OwnerRules, check_same_owner
from member_kit.storage.engine import read_transaction, write_transaction
from member_kit.storage.schema import guarded_tasks

_COLUMNS = (
    guarded_tasks.c.owner,
    guarded_tasks.c.task_metadata,
    guarded_tasks.c.idempotency_key,
)


class SQLGuardedTasks(OwnerRules):
    """A bounded table of upstream task id to :class:`GuardedTask`."""

    def __init__(self, engine: Engine, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._engine = engine

    def __len__(self) -> int:
        with read_transaction(self._engine) as connection:
            count = connection.scalar(select(func.count()).select_from(guarded_tasks))
        return int(count or 0)

    def remember(
        self,
        task_id: str,
        owner: str,
        metadata: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> GuardedTask:
        """Keep ``task_id`` as ``owner``'s (see :meth:`GuardedTasks.remember`)."""
        known = self.find(task_id)
        if known is not None:
            return check_same_owner(known, owner)
        row = {
            "task_id": task_id,
            "owner": owner,
            "task_metadata": json.dumps(dict(metadata)),
            "idempotency_key": idempotency_key,
        }
        try:
            with write_transaction(self._engine) as connection:
                connection.execute(insert(guarded_tasks).values(**row))
                self._forget_oldest(connection)
        except IntegrityError:
            # another guard on this database recorded it first
            known = self.find(task_id)
            if known is None:
                raise errors.UpstreamFailure(
                    "upstream_task_reused", "the upstream answered with a task kept otherwise"
                ) from None
            return check_same_owner(known, owner)
        return GuardedTask(owner, dict(metadata), idempotency_key)

    def opened_under(self, owner: str, idempotency_key: str) -> str | None:
        """The id of ``owner``'s task opened under ``idempotency_key``, if one is kept."""
        c = guarded_tasks.c
        query = select(c.task_id).where(c.owner == owner, c.idempotency_key == idempotency_key)
        with read_transaction(self._engine) as connection:
            found = connection.scalar(query)
        return str(found) if found is not None else None

    def owned_by(self, owner: str, limit: int) -> list[str]:
        """The ids of ``owner``'s tasks, most recently opened first, at most ``limit``."""
        c = guarded_tasks.c
        query = select(c.task_id).where(c.owner == owner).order_by(c.seq.desc()).limit(limit)
        with read_transaction(self._engine) as connection:
            return [str(task_id) for task_id in connection.scalars(query)]

    def find(self, task_id: str) -> GuardedTask | None:
        query = select(*_COLUMNS).where(guarded_tasks.c.task_id == task_id)
        with read_transaction(self._engine) as connection:
            row = connection.execute(query).first()
        if row is None:
            return None
        owner, metadata, key = row
        return GuardedTask(owner, json.loads(metadata), key)

    def _forget_oldest(self, connection: Any) -> None:
        c = guarded_tasks.c
        newest = connection.scalar(select(func.max(c.seq)))
        connection.execute(delete(guarded_tasks).where(c.seq <= newest - self.capacity))
