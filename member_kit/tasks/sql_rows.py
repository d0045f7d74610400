"""How a task record and a row of ``remote_risk_tasks`` turn into each other, and the
SQL fragments the store builds from its columns: pure conversions, no connection, but
for ListTasks's one read (:func:`list_page`), which runs the query built here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, TypeAdapter
from sqlalchemy import Engine, Select, and_, func, or_, select
from sqlalchemy.engine.interfaces import DBAPICursor

from contracts import strict_json
from contracts.wire import Artifact, ListTasksRequest, ListTasksResponse, Message, TaskState
from member_kit.storage.engine import read_transaction
from member_kit.storage.schema import tasks
from member_kit.tasks.pages import decode_page_token, parse_timestamp
from member_kit.tasks.record import TaskRecord, page_of, page_size_of

# History and artifacts are stored as their wire JSON, written in one pass by pydantic.
MESSAGES = TypeAdapter(list[Message])
ARTIFACTS = TypeAdapter(list[Artifact])

# The columns a record is read from, in the order record_of expects them.
COLUMNS = (
    "id",
    "owner",
    "context_id",
    "state",
    "changed_at_ms",
    "sequence",
    "status_message",
    "history",
    "artifacts",
    "task_metadata",
)


def only_row(cursor: DBAPICursor) -> Sequence[Any]:
    """The row of a statement that always yields exactly one (a count, the counter bump)."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the task store's schema is incomplete: run its migrations")
    return row


@lru_cache(maxsize=16)
def update_sql(columns: tuple[str, ...]) -> str:
    """The UPDATE of a task row that writes ``columns``."""
    assignments = ", ".join(f"{name} = :{name}" for name in columns)
    return f"UPDATE {tasks.name} SET {assignments} WHERE id = :id"


def filters(owner: str, query: ListTasksRequest, changed_after: datetime | None) -> list[Any]:
    conditions: list[Any] = [tasks.c.owner == owner]
    if query.context_id:
        conditions.append(tasks.c.context_id == query.context_id)
    if query.status and query.status is not TaskState.UNSPECIFIED:
        conditions.append(tasks.c.state == query.status.value)
    if changed_after is not None:
        # changed_at > changed_after, with changed_at in whole milliseconds
        conditions.append(tasks.c.changed_at_ms > epoch_microseconds(changed_after) // 1000)
    return conditions


def below(after: tuple[datetime, int] | None) -> list[Any]:
    """Rows after the page token in the (changed_at desc, sequence desc) order."""
    if after is None:
        return []
    at_ms, sequence = epoch_milliseconds(after[0]), after[1]
    return [
        or_(
            tasks.c.changed_at_ms < at_ms,
            and_(tasks.c.changed_at_ms == at_ms, tasks.c.sequence < sequence),
        )
    ]


def page_select(
    conditions: list[Any], after: tuple[datetime, int] | None, limit: int
) -> Select[Any]:
    """Up to ``limit`` tasks meeting ``conditions`` below the page token's ``after``,
    newest status change first (the order ListTasks pages in)."""
    return (
        select(*(tasks.c[name] for name in COLUMNS))
        .where(*conditions, *below(after))
        .order_by(tasks.c.changed_at_ms.desc(), tasks.c.sequence.desc())
        .limit(limit)
    )


def list_page(engine: Engine, owner: str, query: ListTasksRequest) -> ListTasksResponse:
    """The owner's tasks matching ``query``, newest status change first, one page: their
    count and the page (read one row longer, to tell whether another page follows). The
    query is checked before anything is read."""
    changed_after = parse_timestamp(query.status_timestamp_after, "statusTimestampAfter")
    conditions = filters(owner, query, changed_after)
    page_size = page_size_of(query)
    after = decode_page_token(query.page_token) if query.page_token else None
    with read_transaction(engine) as connection:
        total = connection.scalar(select(func.count()).select_from(tasks).where(*conditions))
        rows = connection.execute(page_select(conditions, after, page_size + 1)).all()
    page = [record_of(row) for row in rows[:page_size]]
    return page_of(page, len(rows) > page_size, query, int(total or 0))


# --- rows and records ------------------------------------------------------------------------


def changed_values(record: TaskRecord, *, history: bool, artifacts: bool) -> dict[str, Any]:
    """The columns a change writes: the status, and history and artifacts if they grew."""
    values = status_values(record)
    if history:
        values["history"] = history_json(record)
    if artifacts:
        values["artifacts"] = artifacts_json(record)
    return values


def row_values(record: TaskRecord) -> dict[str, Any]:
    return {
        "context_id": record.context_id,
        **status_values(record),
        "history": history_json(record),
        "artifacts": artifacts_json(record),
        "task_metadata": dumps(record.metadata) if record.metadata is not None else None,
    }


def status_values(record: TaskRecord) -> dict[str, Any]:
    """The columns every status change writes."""
    return {
        "state": record.state.value,
        "changed_at_ms": epoch_milliseconds(record.changed_at),
        "sequence": record.sequence,
        "status_message": model_json(record.status_message) if record.status_message else None,
    }


def history_json(record: TaskRecord) -> str:
    return MESSAGES.dump_json(record.history, by_alias=True, exclude_none=True).decode()


def artifacts_json(record: TaskRecord) -> str:
    return ARTIFACTS.dump_json(record.artifacts, by_alias=True, exclude_none=True).decode()


def record_of(row: Sequence[Any]) -> TaskRecord:
    """A fresh :class:`TaskRecord` from its row's :data:`COLUMNS`."""
    (
        task_id,
        owner,
        context_id,
        state,
        changed_at_ms,
        sequence,
        status_message,
        history,
        artifacts,
        task_metadata,
    ) = row
    return TaskRecord(
        id=task_id,
        owner=owner,
        context_id=context_id,
        state=TaskState(state),
        changed_at=datetime.fromtimestamp(changed_at_ms / 1000, UTC),
        sequence=sequence,
        status_message=Message.model_validate(json.loads(status_message))
        if status_message
        else None,
        history=[Message.model_validate(item) for item in json.loads(history)],
        artifacts=[Artifact.model_validate(item) for item in json.loads(artifacts)],
        metadata=json.loads(task_metadata) if task_metadata is not None else None,
    )


def copy_state(source: TaskRecord, target: TaskRecord) -> None:
    target.state = source.state
    target.changed_at = source.changed_at
    target.sequence = source.sequence
    target.status_message = source.status_message
    target.history = source.history
    target.artifacts = source.artifacts
    target.metadata = source.metadata


def model_json(model: BaseModel) -> str:
    """``model``'s wire JSON in one pass: the values of ``dumps(to_wire(model))``."""
    return model.model_dump_json(by_alias=True, exclude_none=True)


def dumps(value: Any) -> str:
    """``value`` as compact JSON text for a column read back with ``json.loads``
    (:func:`contracts.strict_json.dumps`: orjson for the plain shape)."""
    return strict_json.dumps(value).decode()


def epoch_microseconds(at: datetime) -> int:
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def epoch_milliseconds(at: datetime) -> int:
    return epoch_microseconds(at) // 1000
