"""The guard's record of whose each upstream task is, in its database: kept across a
restart, so that a coordinator polling its task, or resending a handoff under the same
idempotency key, is answered by a restarted guard as it was before.

The same rules as :class:`~member_kit.guard.tasks.GuardedTasks` (the same tests run
against both): a task of another owner reads as not found, a task already another
owner's stays theirs, at most ``capacity`` are kept and the oldest go first. Each call
is one short transaction, or joins the one :meth:`SQLGuardedTasks.transaction` holds
open (a send's token claim with its grant watched and its decisions; then its task with
its receipt); two guards on one database that record the same
task at once agree through the table's unique constraints.

Every call on a send's path runs fixed SQL on the driver's connection
(:func:`~member_kit.storage.engine.driver_write`, as the kit's task store does): building
and compiling a Core statement per call cost several times what the database takes to
run it. Recording a task is one insert that does nothing on a conflict, then the
eviction of the oldest, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from member_kit import errors
from member_kit.guard.tasks import GuardedTask, OwnerRules, check_same_owner
from member_kit.storage.engine import driver_errors, driver_read, driver_sql, driver_write
from member_kit.storage.schema import guarded_tasks

_T = guarded_tasks.name
_INSERT = (
    f"INSERT INTO {_T} (task_id, owner, task_metadata, idempotency_key) "
    "VALUES (:task_id, :owner, :task_metadata, :idempotency_key) ON CONFLICT DO NOTHING"
)
_FORGET_OLDEST = f"DELETE FROM {_T} WHERE seq <= (SELECT max(seq) FROM {_T}) - :capacity"
_FIND = f"SELECT owner, task_metadata, idempotency_key FROM {_T} WHERE task_id = :task_id"
_OPENED_UNDER = f"SELECT task_id FROM {_T} WHERE owner = :owner AND idempotency_key = :key"
_OWNED_BY = f"SELECT task_id FROM {_T} WHERE owner = :owner ORDER BY seq DESC LIMIT :limit"
_COUNT = f"SELECT count(*) FROM {_T}"


class SQLGuardedTasks(OwnerRules):
    """A bounded table of upstream task id to :class:`GuardedTask`."""

    def __init__(self, engine: Engine, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._engine = engine
        self.storage_errors: tuple[type[Exception], ...] = (
            SQLAlchemyError,
            driver_errors(engine).Error,
        )
        statements = (_INSERT, _FORGET_OLDEST, _FIND, _OPENED_UNDER, _OWNED_BY, _COUNT)
        self._sql = {sql: driver_sql(engine, sql) for sql in statements}

    def __len__(self) -> int:
        with driver_read(self._engine) as cursor:
            cursor.execute(self._sql[_COUNT])
            row = cursor.fetchone()
        return int(row[0]) if row is not None else 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction that every call inside joins, with whatever else on
        this database is written inside (the receipt's log entry and head): committed
        together or not at all."""
        with driver_write(self._engine):
            yield

    def remember(
        self,
        task_id: str,
        owner: str,
        metadata: Mapping[str, Any],
        idempotency_key: str | None = None,
    ) -> GuardedTask:
        """Keep ``task_id`` as ``owner``'s (see :meth:`GuardedTasks.remember`)."""
        row = {
            "task_id": task_id,
            "owner": owner,
            "task_metadata": json.dumps(dict(metadata)),
            "idempotency_key": idempotency_key,
        }
        with driver_write(self._engine) as cursor:
            cursor.execute(self._sql[_INSERT], row)
            if cursor.rowcount == 1:
                cursor.execute(self._sql[_FORGET_OLDEST], {"capacity": self.capacity})
                return GuardedTask(owner, dict(metadata), idempotency_key)
            known = self._find(cursor, task_id)
        if known is None:  # the key is another task's: another guard on this database
            raise errors.UpstreamFailure(
                "upstream_task_reused", "the upstream answered with a task kept otherwise"
            )
        return check_same_owner(known, owner)

    def opened_under(self, owner: str, idempotency_key: str) -> str | None:
        """The id of ``owner``'s task opened under ``idempotency_key``, if one is kept."""
        with driver_read(self._engine) as cursor:
            cursor.execute(self._sql[_OPENED_UNDER], {"owner": owner, "key": idempotency_key})
            row = cursor.fetchone()
        return str(row[0]) if row is not None else None

    def owned_by(self, owner: str, limit: int) -> list[str]:
        """The ids of ``owner``'s tasks, most recently opened first, at most ``limit``."""
        with driver_read(self._engine) as cursor:
            cursor.execute(self._sql[_OWNED_BY], {"owner": owner, "limit": limit})
            return [str(row[0]) for row in cursor.fetchall()]

    def find(self, task_id: str) -> GuardedTask | None:
        with driver_read(self._engine) as cursor:
            return self._find(cursor, task_id)

    def _find(self, cursor: Any, task_id: str) -> GuardedTask | None:
        cursor.execute(self._sql[_FIND], {"task_id": task_id})
        row = cursor.fetchone()
        if row is None:
            return None
        owner, metadata, key = row
        return GuardedTask(owner, json.loads(metadata), key)
