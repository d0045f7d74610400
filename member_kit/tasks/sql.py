"""The task store in a database: the same rules as the in-memory one, surviving a restart.

Bounds, owner scoping, eviction and ListTasks paging follow
:class:`member_kit.tasks.memory.TaskStore` exactly (the same tests run against both).
Every change is one write transaction that applies the same pure step
(:func:`~member_kit.tasks.record.move`) and writes the columns it changed; the status
sequence comes from a counter row, so it keeps growing across restarts and replicas.

Records handed out are kept (weakly) by id, and every later read or change of that task
updates the same object in place: a change starts from a copy of it when the row still
holds its sequence, else from the row. So a SendMessage waiting on its record is woken by
the background worker's change in this process; another process's change (a replica on
the same PostgreSQL) is seen by polling the row while waiting.

Creating a task, changing it and reading one row run fixed SQL on the driver's connection
(:mod:`~member_kit.tasks.sql_statements`); only ListTasks builds its query with
SQLAlchemy Core (:func:`~member_kit.tasks.sql_rows.list_page`). Creating a task is one
transaction: the idempotency key's lookup (:mod:`~member_kit.tasks.sql_keys`), making
room, the caller's ``claim`` (the token's one-task claim) and the task's insert, so a
token is used up exactly when its task is stored. Inside :meth:`SQLTaskStore.transaction`
every change joins one outer transaction (a blocking send of an immediate skill stores
its task, the claim and the outcome with one commit), and a task created there is written
once, at its commit (:mod:`~member_kit.tasks.sql_once`); where that transaction runs is
:mod:`~member_kit.tasks.off_loop`'s (:meth:`SQLTaskStore.run_transaction`).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine, func, select
from sqlalchemy.engine.interfaces import DBAPICursor

from agent_cards.clock import utc_now
from contracts.wire import Artifact, ListTasksRequest, ListTasksResponse, Message, TaskState
from member_kit import errors
from member_kit.storage.engine import (
    after_commit,
    driver_errors,
    driver_read,
    driver_sql,
    driver_write,
    read_transaction,
)
from member_kit.storage.schema import tasks
from member_kit.tasks import sql_once as once
from member_kit.tasks import sql_statements as statements
from member_kit.tasks.leases import DEFAULT_LEASE_SECONDS, TaskLeases, worker_id
from member_kit.tasks.off_loop import run_off_loop, signal_or_defer
from member_kit.tasks.protocol import BoundedStore
from member_kit.tasks.record import (
    SETTLED_STATES,
    Clock,
    TaskRecord,
    as_it_is,
    bound,
    check_cancelable,
    check_resumable,
    move,
    new_id,
)
from member_kit.tasks.retention import DEFAULT_RETENTION
from member_kit.tasks.sql_counters import TaskCounters
from member_kit.tasks.sql_keys import SQLKeyBook
from member_kit.tasks.sql_rows import (
    changed_values,
    copy_state,
    epoch_milliseconds,
    list_page,
    record_of,
    row_values,
    update_sql,
)

SETTLE_POLL_SECONDS = 1.0  # how often a waiter reads the row for another process's change

T = TypeVar("T")


class SQLTaskStore(BoundedStore):
    """A bounded, owner-scoped task store in the database behind ``engine`` (migrated)."""

    def __init__(
        self,
        engine: Engine,
        capacity: int,
        *,
        clock: Clock = utc_now,
        new_id: Callable[[], str] = new_id,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        retention: timedelta = DEFAULT_RETENTION,
    ) -> None:
        super().__init__(capacity, clock, new_id)
        self._engine = engine
        self._keys = SQLKeyBook(engine, retention)
        self._counters = TaskCounters(engine)
        self.leases = TaskLeases(engine, worker_id(), lease_seconds, clock)
        self.lease_seconds = lease_seconds
        self._live: weakref.WeakValueDictionary[str, TaskRecord] = weakref.WeakValueDictionary()
        self._integrity_error: type[Exception] = driver_errors(engine).IntegrityError

    def __len__(self) -> int:
        with read_transaction(self._engine) as connection:
            return int(connection.scalar(select(func.count()).select_from(tasks)) or 0)

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
        """Open a SUBMITTED task; with an ``idempotency_key`` the owner's task for that key
        is returned instead if there is one (also when another process created it first).
        ``claim`` runs only when a task is created, in the same transaction as its insert:
        if it raises nothing is created, and if the insert fails its writes are undone.
        Inside :meth:`transaction` the task's row is written when that commits. Where
        replicas race for a key, losing the race fails before anything else is written
        (:mod:`~member_kit.tasks.sql_keys`), in a savepoint that undoes it alone."""
        savepoint = idempotency_key is not None and self._keys.races
        try:
            with driver_write(self._engine, savepoint=savepoint) as cursor:
                record = self._keyed(cursor, owner, idempotency_key)
                evicted: once.Evicted = []
                if record is None:
                    # its sequence the first of its own until it is inserted (_insert)
                    record = self._new_record(owner, message, context_id, metadata, 1)
                    evicted = self._open(cursor, record, idempotency_key, claim)
        except self._integrity_error:
            if idempotency_key is None:
                raise
            found = self.find_by_idempotency_key(owner, idempotency_key)
            if found is None:
                raise
            return found
        self._evicted(evicted)
        return self._publish(record)

    def _open(
        self,
        cursor: DBAPICursor,
        record: TaskRecord,
        key: str | None,
        claim: Callable[[], None] | None,
    ) -> once.Evicted:
        """Store the new ``record`` (its key's needs, room, the claim); what was evicted."""
        now_ms = epoch_milliseconds(record.changed_at)
        if key is not None:
            self._keys.opening(cursor, record.owner, key, record.id, now_ms)
        evicted = self._make_room(cursor, now_ms)
        if claim is not None:
            claim()
        self._insert(cursor, record, key, now_ms)
        return evicted

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction that every change made inside joins: they are stored
        together or not at all. A record changed inside may be ahead of the database if
        the commit fails; its sequence then differs from the row's, so the next change or
        read starts from the row. Evictions made inside are announced after the commit;
        a task created inside is written once, as it is at the end (:mod:`sql_once`)."""
        if once.opened_by(self) is not None:
            with driver_write(self._engine):
                yield
            return
        with once.opening(self) as opened, driver_write(self._engine) as cursor:
            yield
            self._write_unwritten(cursor, opened)
        after_commit(self._engine, lambda: self._announce(opened.evicted))

    async def run_transaction(self, work: Callable[[], T]) -> T:
        """``work()`` inside :meth:`transaction`, off the event loop (see
        :mod:`~member_kit.tasks.off_loop`)."""
        return await run_off_loop(self._engine, self.transaction, work)

    def find_by_idempotency_key(self, owner: str, key: str) -> TaskRecord | None:
        """The owner's task created under ``key`` (as it ended, if it was evicted) while
        the key is retained; raises IdempotencyKeyExpired after its retention window."""
        with driver_read(self._engine) as cursor:
            record = self._keyed(cursor, owner, key)
        return self._publish(record) if record is not None else None

    def resume(self, record: TaskRecord, message: Message) -> None:
        """Take a further message for an interrupted task and submit it again."""
        with driver_write(self._engine) as cursor:
            current = self._current(cursor, record.id)
            if current is None:
                raise errors.TaskNotFound(record.id)
            check_resumable(current)
            current.history.append(bound(message, current))
            self._move(cursor, current, TaskState.SUBMITTED, None, history=True)
            self._lease(cursor, current.id)
        self._publish(current)

    def advance(
        self,
        task_id: str,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> bool:
        """Move a live task on; False if it is gone or already terminal (e.g. cancelled)."""
        with driver_write(self._engine) as cursor:
            record = self._current(cursor, task_id)
            if record is None or record.terminal:
                return False
            if artifacts:
                record.artifacts.extend(artifacts)
            self._move(cursor, record, state, message, artifacts=bool(artifacts))
        self._publish(record)
        return True

    def advance_through(
        self,
        task_id: str,
        through: TaskState,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> TaskRecord | None:
        """Move a live task into ``through`` and on to ``state`` with one write; the task
        as it was in ``through`` (for its update), None if it is gone or already terminal."""
        with driver_write(self._engine) as cursor:
            record = self._current(cursor, task_id)
            if record is None or record.terminal:
                return None
            sequence = self._next_sequence(cursor, 2, record.id)
            move(record, through, None, self._now(), sequence - 1)
            passed = as_it_is(record)
            if artifacts:
                record.artifacts.extend(artifacts)
            move(record, state, message, self._now(), sequence)
            self._write(cursor, record, history=message is not None, artifacts=bool(artifacts))
        self._publish(record)
        return passed

    def cancel(self, owner: str, task_id: str) -> TaskRecord:
        with driver_write(self._engine) as cursor:
            record = self._current(cursor, task_id)
            if record is None or record.owner != owner:
                raise errors.TaskNotFound(task_id)
            check_cancelable(record)
            self._move(cursor, record, TaskState.CANCELED, None)
        return self._publish(record)

    async def wait_settled(self, record: TaskRecord) -> None:
        """Return once the task is terminal or waiting for input or authorization."""
        while record.state not in SETTLED_STATES:
            try:
                await asyncio.wait_for(record.settled.wait(), SETTLE_POLL_SECONDS)
            except TimeoutError:
                current = self._read(record.id)
                if current is None:
                    return
                self._publish(current)

    # --- work leases (member_kit.tasks.leases) ---------------------------------------------

    def renew(self, task_ids: Collection[str]) -> set[str]:
        return self.leases.renew(task_ids)

    def claim(self, task_id: str) -> bool:
        return self.leases.claim(task_id)

    def take_over(self, limit: int) -> list[TaskRecord]:
        taken = (self._read(task_id) for task_id in self.leases.take_over(limit))
        return [self._publish(record) for record in taken if record is not None]

    def release(self) -> None:
        self.leases.release()

    # --- reading --------------------------------------------------------------------------

    def get(self, owner: str, task_id: str) -> TaskRecord:
        record = self._read(task_id)
        if record is None or record.owner != owner:
            raise errors.TaskNotFound(task_id)
        return self._publish(record)

    def list(self, owner: str, query: ListTasksRequest) -> ListTasksResponse:
        """The owner's tasks matching ``query``, newest status change first, one page."""
        return list_page(self._engine, owner, query)

    # --- internals ------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return driver_sql(self._engine, sql)

    def _next_sequence(self, cursor: DBAPICursor, count: int, task_id: str | None = None) -> int:
        """The last of ``count`` new status sequence numbers: one atomic bump of the counter,
        or, for a task not written yet, counted within it until it is."""
        unwritten = once.unwritten_in(self, task_id)
        if unwritten is not None:
            return unwritten.next_sequence(count)
        return self._bump(cursor, count)

    def _bump(self, cursor: DBAPICursor, count: int) -> int:
        return self._counters.bump(cursor, count)

    def _insert(
        self, cursor: DBAPICursor, record: TaskRecord, idempotency_key: str | None, now_ms: int
    ) -> None:
        """Insert the new task now, or keep it to insert when the open :meth:`transaction`
        commits (its sequence then counted within it until then)."""
        fixed = {
            "idempotency_key": idempotency_key,
            "key_expires_at_ms": self._keys.expiry(now_ms) if idempotency_key else None,
            "worker": self.leases.worker,
            "until": self.leases.until(),
        }
        opened = once.opened_by(self)
        if opened is not None:
            opened.unwritten[record.id] = once.Unwritten(record, fixed)
            return
        record.sequence = self._bump(cursor, 1)
        row = {"id": record.id, "owner": record.owner, **row_values(record), **fixed}
        cursor.execute(self._sql(statements.INSERT), row)

    def _write_unwritten(self, cursor: DBAPICursor, opened: once.Opened) -> None:
        """Insert the tasks the transaction opened, each once, as they now are."""
        if not opened.unwritten:
            return
        rows = once.sequenced(opened, self._bump(cursor, opened.total_moves()))
        cursor.executemany(self._sql(statements.INSERT), rows)
        for task_id, unwritten in opened.unwritten.items():
            live = self._live.get(task_id)
            if live is not None:
                live.sequence = unwritten.record.sequence

    def _lease(self, cursor: DBAPICursor, task_id: str) -> None:
        """Take the work lease of a task this process is about to work on again."""
        if once.unwritten_in(self, task_id) is not None:
            return  # its insert names this process and the lease's end
        lease = {"worker": self.leases.worker, "until": self.leases.until(), "id": task_id}
        cursor.execute(self._sql(statements.LEASE), lease)

    def _make_room(self, cursor: DBAPICursor, now_ms: int) -> once.Evicted:
        """Evict down to the low-water mark if the store is full (one statement per
        batch, see :func:`~member_kit.tasks.record.evictions_due`); the evicted tasks'
        ``(owner, id)``. The counter says when; the table, counted, how many (see
        :mod:`~member_kit.tasks.sql_counters`)."""
        opened = once.opened_by(self)
        unwritten = len(opened.unwritten) if opened is not None else 0
        due = self._counters.evictions_due(cursor, self.capacity, unwritten)
        if not due:
            return []
        cursor.execute(self._sql(statements.EVICT_OLDEST_FINISHED), {"count": due})
        rows = cursor.fetchall()
        if not rows:
            raise errors.TaskStoreFull(self.capacity)
        self._counters.removed(cursor, len(rows))
        self._keys.retain(cursor, rows, now_ms)
        return [(row[1], row[0]) for row in rows]

    def _evicted(self, evicted: once.Evicted) -> None:
        """Announce stored evictions now, or when the open transaction() commits."""
        if not evicted:
            return
        opened = once.opened_by(self)
        if opened is None:
            self._announce(evicted)
        else:
            opened.evicted.extend(evicted)

    def _move(
        self,
        cursor: DBAPICursor,
        record: TaskRecord,
        state: TaskState,
        message: Message | None,
        *,
        history: bool = False,
        artifacts: bool = False,
    ) -> None:
        """Move ``record`` on and write the columns that changed."""
        move(record, state, message, self._now(), self._next_sequence(cursor, 1, record.id))
        self._write(cursor, record, history=history or message is not None, artifacts=artifacts)

    def _write(
        self, cursor: DBAPICursor, record: TaskRecord, *, history: bool, artifacts: bool
    ) -> None:
        """Write the status of ``record``, and its history and artifacts if they grew."""
        unwritten = once.unwritten_in(self, record.id)
        if unwritten is not None:
            unwritten.changed(record)  # its one insert, built then, comes at the commit
            return
        values = changed_values(record, history=history, artifacts=artifacts)
        cursor.execute(self._sql(update_sql(tuple(values))), {**values, "id": record.id})

    def _current(self, cursor: DBAPICursor, task_id: str) -> TaskRecord | None:
        """The task to change: a copy of this process's record when the row still holds
        its sequence, else the row itself; None if the task is gone."""
        unwritten = once.unwritten_in(self, task_id)
        if unwritten is not None:
            return unwritten.copy()
        known = self._live.get(task_id)
        if known is None:
            return self._load(cursor, task_id)
        cursor.execute(self._sql(statements.SEQUENCE_OF), {"id": task_id})
        stored = cursor.fetchone()
        if stored is None:
            return None
        if stored[0] != known.sequence:
            return self._load(cursor, task_id)
        return replace(known, history=list(known.history), artifacts=list(known.artifacts))

    def _keyed(self, cursor: DBAPICursor, owner: str, key: str | None) -> TaskRecord | None:
        """The owner's task created under ``key`` (none without a key), as it ended if it
        was evicted; raises IdempotencyKeyExpired after the key's retention window."""
        if key is None:
            return None
        known = self._keys.lookup(cursor, owner, key, epoch_milliseconds(self._now()))
        if known is None:
            return None
        task_id, retained = known
        return record_of(retained) if retained is not None else self._load(cursor, task_id)

    def _read(self, task_id: str) -> TaskRecord | None:
        with driver_read(self._engine) as cursor:
            return self._load(cursor, task_id)

    def _load(self, cursor: DBAPICursor, task_id: str) -> TaskRecord | None:
        unwritten = once.unwritten_in(self, task_id)
        if unwritten is not None:
            return unwritten.copy()
        cursor.execute(self._sql(statements.BY_ID), {"id": task_id})
        row = cursor.fetchone()
        return record_of(row) if row is not None else None

    def _publish(self, fresh: TaskRecord) -> TaskRecord:
        """The one object for this task in this process, brought up to date with ``fresh``."""
        live = self._live.get(fresh.id)
        if live is None:
            self._live[fresh.id] = live = fresh
        else:
            copy_state(fresh, live)
        signal_or_defer(live)
        return live
