"""Work leases on unfinished tasks, so that no task is orphaned when a process dies.

Every unfinished (SUBMITTED or WORKING) task row names the replica working it
(``worker``, a random id per process) and until when (``lease_until_ms``). The process
that opens a task takes its lease in the same insert; every third of the lease it renews
the leases of the tasks it is working on with one statement and reads which of them
another process now names (:meth:`TaskLeases.renew`): those it stops working (taken
over). A task it could not renew because it has just finished (its worker's commit in
another database thread) or whose row it cannot see yet is not one taken over.
A task of this process that nobody works on any more (its work failed, say, on a storage
fault) is not renewed, so its lease runs out and it is resumed like any other.

A process that starts, and every process every third of a lease, takes over unfinished
tasks whose lease ran out (:meth:`TaskLeases.take_over`): the work of a replica that died
(SIGKILL, a lost host) is resumed by a survivor, or by the same service when it starts
again on the same database, within about one lease. A process that stops cleanly gives
its leases back (:meth:`TaskLeases.release`) so that another one resumes at once.

The statements re-check their whole condition on the row they change, so on PostgreSQL
two replicas taking over at once cannot both win one task (the second sees the first's
lease, which has not run out). The risk skill is deterministic and idempotent, so a task
resumed from its stored input finishes with the same outcome; a task whose input cannot
be read again ends FAILED with a reason instead of staying WORKING.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from datetime import UTC, datetime

from sqlalchemy import Engine

from contracts.wire import TaskState
from member_kit.storage.engine import driver_sql, driver_write
from member_kit.storage.schema import tasks

DEFAULT_LEASE_SECONDS = 10.0
MIN_LEASE_SECONDS = 0.5
_UNFINISHED = f"state IN ('{TaskState.SUBMITTED.value}', '{TaskState.WORKING.value}')"
_RAN_OUT = "(lease_until_ms IS NULL OR lease_until_ms < :now)"
_RENEW = (
    f"UPDATE {tasks.name} SET lease_until_ms = :until "
    f"WHERE worker = :worker AND {_UNFINISHED} AND id IN ({{ids}})"
)
_TAKEN = f"SELECT id FROM {tasks.name} WHERE worker <> :worker AND id IN ({{ids}})"
_CLAIM = (
    f"UPDATE {tasks.name} SET worker = :worker, lease_until_ms = :until "
    f"WHERE id = :id AND {_UNFINISHED} AND (worker = :worker OR {_RAN_OUT})"
)
_TAKE_OVER = (
    f"UPDATE {tasks.name} SET worker = :worker, lease_until_ms = :until "
    f"WHERE id IN (SELECT id FROM {tasks.name} WHERE {_UNFINISHED} AND {_RAN_OUT} "
    f"ORDER BY changed_at_ms LIMIT :limit) AND {_UNFINISHED} AND {_RAN_OUT} RETURNING id"
)
_RELEASE = f"UPDATE {tasks.name} SET lease_until_ms = 0 WHERE worker = :worker AND {_UNFINISHED}"


def worker_id() -> str:
    """A new random id for this process as a worker of tasks."""
    return uuid.uuid4().hex


def epoch_ms(at: datetime) -> int:
    return int(at.astimezone(UTC).timestamp() * 1000)


class TaskLeases:
    """The lease statements of one process (``worker``) on the task table."""

    def __init__(
        self, engine: Engine, worker: str, lease_seconds: float, clock: Callable[[], datetime]
    ) -> None:
        if lease_seconds < MIN_LEASE_SECONDS:
            raise ValueError(f"a task lease lasts at least {MIN_LEASE_SECONDS} s")
        self.worker = worker
        self.lease_seconds = lease_seconds
        self._engine = engine
        self._clock = clock
        self._sql = {
            name: driver_sql(engine, sql)
            for name, sql in (
                ("claim", _CLAIM),
                ("take_over", _TAKE_OVER),
                ("release", _RELEASE),
            )
        }

    def until(self) -> int:
        """Where a lease taken now ends, in epoch milliseconds."""
        return epoch_ms(self._clock()) + int(self.lease_seconds * 1000)

    def renew(self, task_ids: Collection[str]) -> set[str]:
        """Renew this process's leases on ``task_ids`` (the tasks it works on); those of
        them another process holds now (taken over). A task missing from the answer is
        not lost: it may have finished, or its row not be committed yet."""
        if not task_ids:
            return set()
        names = [f"id{index}" for index in range(len(task_ids))]
        ids = ", ".join(f":{n}" for n in names)
        values: dict[str, object] = {"worker": self.worker, "until": self.until()}
        values.update(zip(names, task_ids, strict=True))
        with driver_write(self._engine) as cursor:
            cursor.execute(driver_sql(self._engine, _RENEW.format(ids=ids)), values)
            cursor.execute(driver_sql(self._engine, _TAKEN.format(ids=ids)), values)
            return {row[0] for row in cursor.fetchall()}

    def claim(self, task_id: str) -> bool:
        """Take the lease of an unfinished task unless a live lease of another holds it."""
        values = {"id": task_id, "worker": self.worker, "until": self.until(), "now": self._ms()}
        with driver_write(self._engine) as cursor:
            cursor.execute(self._sql["claim"], values)
            return bool(cursor.rowcount == 1)

    def take_over(self, limit: int) -> list[str]:
        """Lease up to ``limit`` unfinished tasks whose lease ran out; their ids."""
        values = {"worker": self.worker, "until": self.until(), "now": self._ms(), "limit": limit}
        with driver_write(self._engine) as cursor:
            cursor.execute(self._sql["take_over"], values)
            return [row[0] for row in cursor.fetchall()]

    def release(self) -> None:
        """Give this process's leases back (on a clean stop)."""
        with driver_write(self._engine) as cursor:
            cursor.execute(self._sql["release"], {"worker": self.worker})

    def _ms(self) -> int:
        return epoch_ms(self._clock())
