"""The idempotency keys of :class:`~member_kit.tasks.sql.SQLTaskStore`, in their own table.

The rules are those of :mod:`member_kit.tasks.retention`; every statement here runs on
the cursor of the task store's open write (or read) transaction, so a key is recorded
exactly when its task is stored, and an evicted task's final row is kept with its key in
the same transaction that deletes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPICursor

from member_kit import errors
from member_kit.storage.engine import driver_sql
from member_kit.storage.schema import idempotency_keys, tasks
from member_kit.tasks.retention import PURGE_INTERVAL, check_retention
from member_kit.tasks.sql_rows import dumps

_TABLE = idempotency_keys.name
# The key's row and, in the same statement, a stored task opened under the key (found
# when the key's row was purged before the task was evicted): one read for a key not seen.
_LOOKUP = (
    f"SELECT task_id, expires_at_ms, retained_task FROM {_TABLE} "
    "WHERE owner = :owner AND idempotency_key = :key "
    f"UNION ALL SELECT id, NULL, NULL FROM {tasks.name} "
    "WHERE owner = :owner AND idempotency_key = :key"
)
_REMEMBER = (
    f"INSERT INTO {_TABLE} (owner, idempotency_key, task_id, expires_at_ms) "
    "VALUES (:owner, :key, :task_id, :expires_at_ms)"
)
_RETAIN = f"UPDATE {_TABLE} SET retained_task = :retained WHERE task_id = :task_id"
_PURGE = f"DELETE FROM {_TABLE} WHERE expires_at_ms < :before"


class SQLKeyBook:
    def __init__(self, engine: Engine, retention: timedelta) -> None:
        check_retention(retention)
        self.retention = retention
        self._retention_ms = int(retention.total_seconds() * 1000)
        self._purge_every_ms = int(PURGE_INTERVAL.total_seconds() * 1000)
        self._purged_at: int | None = None
        self._sql = {
            name: driver_sql(engine, sql)
            for name, sql in (
                ("lookup", _LOOKUP),
                ("remember", _REMEMBER),
                ("retain", _RETAIN),
                ("purge", _PURGE),
            )
        }

    def lookup(
        self, cursor: DBAPICursor, owner: str, key: str, now_ms: int
    ) -> tuple[str, list[Any] | None] | None:
        """The key's task id and, if the task was evicted, its final row; None for a key
        never seen (or long forgotten, its task gone too); raises IdempotencyKeyExpired
        after the window."""
        cursor.execute(self._sql["lookup"], {"owner": owner, "key": key})
        rows = cursor.fetchall()
        kept = [row for row in rows if row[1] is not None]  # the key's own row
        if not kept:
            return (rows[0][0], None) if rows else None
        task_id, expires_at_ms, retained = kept[0]
        if now_ms >= expires_at_ms:
            raise errors.IdempotencyKeyExpired(int(self.retention.total_seconds()))
        return task_id, json.loads(retained) if retained is not None else None

    def remember(
        self, cursor: DBAPICursor, owner: str, key: str, task_id: str, now_ms: int
    ) -> None:
        self._purge(cursor, now_ms)
        values = {
            "owner": owner,
            "key": key,
            "task_id": task_id,
            "expires_at_ms": now_ms + self._retention_ms,
        }
        cursor.execute(self._sql["remember"], values)

    def retain(self, cursor: DBAPICursor, evicted: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Keep the final rows of evicted tasks (``(task_id, row)``) with their keys."""
        if evicted:
            cursor.executemany(
                self._sql["retain"],
                [{"task_id": task_id, "retained": dumps(list(row))} for task_id, row in evicted],
            )

    def _purge(self, cursor: DBAPICursor, now_ms: int) -> None:
        """Drop keys past their refusal window (a second window after they expired)."""
        if self._purged_at is not None and now_ms - self._purged_at < self._purge_every_ms:
            return
        cursor.execute(self._sql["purge"], {"before": now_ms - self._retention_ms})
        self._purged_at = now_ms
