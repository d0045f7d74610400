"""The task store in a database: the same rules as the in-memory one, surviving a restart.

Bounds, owner scoping, eviction and ListTasks paging follow :class:`remote_risk.tasks.TaskStore`
exactly (the same tests run against both). Every change is one write transaction that
applies the same pure step as the in-memory store (:func:`~remote_risk.tasks.move`) and
writes the columns it changed; the status sequence comes from a counter row, so it keeps
growing across restarts and replicas, and every change gives the row a new one.

Records handed out are kept (weakly) by id, and every later read or change of that task
updates the same object in place. A change starts from a copy of that object when the row
still holds its sequence (one small read instead of decoding the whole row again); when
another process changed the row meanwhile, the change starts from the row.

So a SendMessage waiting on its record is woken by the background worker's change in this
process; a change made by another process (a replica on the same PostgreSQL) is seen by
polling the row while waiting.

Calls are synchronous and short (one small transaction); on SQLite they block the event
loop for well under a millisecond per call.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import weakref
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, Row, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from contracts.wire import (
    TERMINAL_TASK_STATES,
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    TaskState,
    to_wire,
)
from remote_risk import errors
from remote_risk.storage.engine import read_transaction, write_transaction
from remote_risk.storage.schema import TASK_SEQUENCE, counters, tasks
from remote_risk.tasks import (
    DEFAULT_PAGE_SIZE,
    SETTLED_STATES,
    Clock,
    TaskRecord,
    bound,
    check_cancelable,
    check_resumable,
    decode_page_token,
    encode_page_token,
    move,
    parse_timestamp,
    signal_settled,
    utc_now,
    whole_milliseconds,
)

# While waiting, the row is read again this often to notice another process's change.
SETTLE_POLL_SECONDS = 1.0
_TERMINAL = sorted(state.value for state in TERMINAL_TASK_STATES)


class SQLTaskStore:
    """A bounded, owner-scoped task store in the database behind ``engine`` (migrated)."""

    def __init__(
        self,
        engine: Engine,
        capacity: int,
        *,
        clock: Clock = utc_now,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        if capacity < 1:
            raise ValueError("a task store needs room for at least one task")
        self.capacity = capacity
        self._engine = engine
        self._clock = clock
        self._new_id = new_id
        self._live: weakref.WeakValueDictionary[str, TaskRecord] = weakref.WeakValueDictionary()

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
    ) -> TaskRecord:
        """Open a SUBMITTED task; with an ``idempotency_key`` the owner's task for that key
        is returned instead if there is one (also when another process created it first)."""
        try:
            with write_transaction(self._engine) as connection:
                record = self._keyed(connection, owner, idempotency_key)
                if record is None:
                    record = self._insert(
                        connection, owner, message, context_id, metadata, idempotency_key
                    )
        except IntegrityError:
            if idempotency_key is None:
                raise
            found = self.find_by_idempotency_key(owner, idempotency_key)
            if found is None:
                raise
            return found
        return self._publish(record)

    def find_by_idempotency_key(self, owner: str, key: str) -> TaskRecord | None:
        """The owner's task created under ``key``, if it is still stored."""
        with read_transaction(self._engine) as connection:
            record = self._keyed(connection, owner, key)
        return self._publish(record) if record is not None else None

    def resume(self, record: TaskRecord, message: Message) -> None:
        """Take a further message for an interrupted task and submit it again."""
        with write_transaction(self._engine) as connection:
            current = self._current(connection, record.id)
            if current is None:
                raise errors.TaskNotFound(record.id)
            check_resumable(current)
            current.history.append(bound(message, current))
            self._move(connection, current, TaskState.SUBMITTED, None, history=True)
        self._publish(current)

    def advance(
        self,
        task_id: str,
        state: TaskState,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> bool:
        """Move a live task on; False if it is gone or already terminal (e.g. cancelled)."""
        with write_transaction(self._engine) as connection:
            record = self._current(connection, task_id)
            if record is None or record.terminal:
                return False
            if artifacts:
                record.artifacts.extend(artifacts)
            self._move(connection, record, state, message, artifacts=bool(artifacts))
        self._publish(record)
        return True

    def cancel(self, owner: str, task_id: str) -> TaskRecord:
        with write_transaction(self._engine) as connection:
            record = self._current(connection, task_id)
            if record is None or record.owner != owner:
                raise errors.TaskNotFound(task_id)
            check_cancelable(record)
            self._move(connection, record, TaskState.CANCELED, None)
        return self._publish(record)

    async def wait_settled(self, record: TaskRecord) -> None:
        """Return once the task is terminal or waiting for input or authorization."""
        while record.state not in SETTLED_STATES:
            try:
                await asyncio.wait_for(record.settled.wait(), SETTLE_POLL_SECONDS)
            except TimeoutError:
                with read_transaction(self._engine) as connection:
                    current = self._load(connection, record.id)
                if current is None:
                    return
                self._publish(current)

    # --- reading --------------------------------------------------------------------------

    def get(self, owner: str, task_id: str) -> TaskRecord:
        with read_transaction(self._engine) as connection:
            record = self._owned(connection, owner, task_id)
        return self._publish(record)

    def list(self, owner: str, query: ListTasksRequest) -> ListTasksResponse:
        """The owner's tasks matching ``query``, newest status change first, one page."""
        changed_after = parse_timestamp(query.status_timestamp_after, "statusTimestampAfter")
        conditions = _filters(owner, query, changed_after)
        page_size = query.page_size or DEFAULT_PAGE_SIZE
        after = decode_page_token(query.page_token) if query.page_token else None
        page_query = (
            select(tasks)
            .where(*conditions, *_below(after))
            .order_by(tasks.c.changed_at_ms.desc(), tasks.c.sequence.desc())
            .limit(page_size + 1)
        )
        with read_transaction(self._engine) as connection:
            total = connection.scalar(select(func.count()).select_from(tasks).where(*conditions))
            rows = connection.execute(page_query).all()
        page = [record_of(row) for row in rows[:page_size]]
        more = len(rows) > page_size
        return ListTasksResponse(
            tasks=[
                record.snapshot(query.history_length, bool(query.include_artifacts))
                for record in page
            ],
            next_page_token=encode_page_token(page[-1].sort_key) if more else "",
            page_size=page_size,
            total_size=int(total or 0),
        )

    # --- internals ------------------------------------------------------------------------

    def _insert(
        self,
        connection: Connection,
        owner: str,
        message: Message,
        context_id: str | None,
        metadata: dict[str, Any] | None,
        idempotency_key: str | None,
    ) -> TaskRecord:
        self._make_room(connection)
        record = TaskRecord(
            id=self._new_id(),
            owner=owner,
            context_id=context_id or self._new_id(),
            state=TaskState.SUBMITTED,
            changed_at=whole_milliseconds(self._clock()),
            sequence=_next_sequence(connection),
            metadata=metadata,
        )
        record.history.append(bound(message, record))
        values = {**_row_values(record), "idempotency_key": idempotency_key}
        connection.execute(insert(tasks).values(id=record.id, owner=owner, **values))
        return record

    def _make_room(self, connection: Connection) -> None:
        stored = connection.scalar(select(func.count()).select_from(tasks)) or 0
        if stored < self.capacity:
            return
        oldest = connection.scalar(
            select(tasks.c.id)
            .where(tasks.c.state.in_(_TERMINAL))
            .order_by(tasks.c.changed_at_ms, tasks.c.sequence)
            .limit(1)
        )
        if oldest is None:
            raise errors.TaskStoreFull(self.capacity)
        connection.execute(delete(tasks).where(tasks.c.id == oldest))

    def _move(
        self,
        connection: Connection,
        record: TaskRecord,
        state: TaskState,
        message: Message | None,
        *,
        history: bool = False,
        artifacts: bool = False,
    ) -> None:
        """Move ``record`` on and write the columns that changed: the status always, the
        history when it grew (``history``, or a status message) and the artifacts when
        they did (``artifacts``)."""
        at = whole_milliseconds(self._clock())
        move(record, state, message, at, _next_sequence(connection))
        values = _status_values(record)
        if history or message is not None:
            values["history"] = _history_json(record)
        if artifacts:
            values["artifacts"] = _artifacts_json(record)
        connection.execute(update(tasks).where(tasks.c.id == record.id).values(**values))

    def _current(self, connection: Connection, task_id: str) -> TaskRecord | None:
        """The task to change: a copy of this process's record when the row still holds
        its sequence, else the row itself; None if the task is gone."""
        known = self._live.get(task_id)
        if known is None:
            return self._load(connection, task_id)
        stored = connection.scalar(select(tasks.c.sequence).where(tasks.c.id == task_id))
        if stored is None:
            return None
        if stored != known.sequence:
            return self._load(connection, task_id)
        return replace(known, history=list(known.history), artifacts=list(known.artifacts))

    def _keyed(self, connection: Connection, owner: str, key: str | None) -> TaskRecord | None:
        """The owner's task created under ``key`` (none without a key)."""
        if key is None:
            return None
        query = select(tasks).where(tasks.c.owner == owner, tasks.c.idempotency_key == key)
        row = connection.execute(query).first()
        return record_of(row) if row is not None else None

    def _load(self, connection: Connection, task_id: str) -> TaskRecord | None:
        row = connection.execute(select(tasks).where(tasks.c.id == task_id)).first()
        return record_of(row) if row is not None else None

    def _owned(self, connection: Connection, owner: str, task_id: str) -> TaskRecord:
        record = self._load(connection, task_id)
        if record is None or record.owner != owner:
            raise errors.TaskNotFound(task_id)
        return record

    def _publish(self, fresh: TaskRecord) -> TaskRecord:
        """The one object for this task in this process, brought up to date with ``fresh``."""
        live = self._live.get(fresh.id)
        if live is None:
            self._live[fresh.id] = live = fresh
        else:
            _copy_state(fresh, live)
        signal_settled(live)
        return live


def _next_sequence(connection: Connection) -> int:
    """The next status sequence number: one atomic increment of the counter row."""
    bumped = (
        update(counters)
        .where(counters.c.name == TASK_SEQUENCE)
        .values(value=counters.c.value + 1)
        .returning(counters.c.value)
    )
    return int(connection.execute(bumped).scalar_one())


def _filters(owner: str, query: ListTasksRequest, changed_after: datetime | None) -> list[Any]:
    conditions: list[Any] = [tasks.c.owner == owner]
    if query.context_id:
        conditions.append(tasks.c.context_id == query.context_id)
    if query.status and query.status is not TaskState.UNSPECIFIED:
        conditions.append(tasks.c.state == query.status.value)
    if changed_after is not None:
        # changed_at > changed_after, with changed_at in whole milliseconds
        conditions.append(tasks.c.changed_at_ms > _epoch_microseconds(changed_after) // 1000)
    return conditions


def _below(after: tuple[datetime, int] | None) -> list[Any]:
    """Rows after the page token in the (changed_at desc, sequence desc) order."""
    if after is None:
        return []
    at_ms, sequence = _epoch_milliseconds(after[0]), after[1]
    return [
        or_(
            tasks.c.changed_at_ms < at_ms,
            and_(tasks.c.changed_at_ms == at_ms, tasks.c.sequence < sequence),
        )
    ]


# --- rows and records ------------------------------------------------------------------------


def _row_values(record: TaskRecord) -> dict[str, Any]:
    return {
        "context_id": record.context_id,
        **_status_values(record),
        "history": _history_json(record),
        "artifacts": _artifacts_json(record),
        "task_metadata": _dumps(record.metadata) if record.metadata is not None else None,
    }


def _status_values(record: TaskRecord) -> dict[str, Any]:
    """The columns every status change writes."""
    return {
        "state": record.state.value,
        "changed_at_ms": _epoch_milliseconds(record.changed_at),
        "sequence": record.sequence,
        "status_message": _dumps(to_wire(record.status_message)) if record.status_message else None,
    }


def _history_json(record: TaskRecord) -> str:
    return _dumps([to_wire(message) for message in record.history])


def _artifacts_json(record: TaskRecord) -> str:
    return _dumps([to_wire(artifact) for artifact in record.artifacts])


def record_of(row: Row[Any]) -> TaskRecord:
    """A fresh :class:`TaskRecord` from its row."""
    status_message = row.status_message
    return TaskRecord(
        id=row.id,
        owner=row.owner,
        context_id=row.context_id,
        state=TaskState(row.state),
        changed_at=datetime.fromtimestamp(row.changed_at_ms / 1000, UTC),
        sequence=row.sequence,
        status_message=Message.model_validate(json.loads(status_message))
        if status_message
        else None,
        history=[Message.model_validate(item) for item in json.loads(row.history)],
        artifacts=[Artifact.model_validate(item) for item in json.loads(row.artifacts)],
        metadata=json.loads(row.task_metadata) if row.task_metadata is not None else None,
    )


def _copy_state(source: TaskRecord, target: TaskRecord) -> None:
    target.state = source.state
    target.changed_at = source.changed_at
    target.sequence = source.sequence
    target.status_message = source.status_message
    target.history = source.history
    target.artifacts = source.artifacts
    target.metadata = source.metadata


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _epoch_microseconds(at: datetime) -> int:
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _epoch_milliseconds(at: datetime) -> int:
    return _epoch_microseconds(at) // 1000
