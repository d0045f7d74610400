"""The idempotency keys of :class:`~member_kit.tasks.sql.SQLTaskStore`.

The rules are those of :mod:`member_kit.tasks.retention`. While its task is stored, a
key lives in the task's own row (``idempotency_key`` and ``key_expires_at_ms``), written
with it: on SQLite a send opening a task writes nothing else for its key. When the task is
evicted, the key's own row takes over, holding the task's final row, in the same
transaction that deletes it, for as long as the key is remembered. On PostgreSQL, where
replicas race for a key, the key's row is also written first, when the task is opened,
so a lost race fails before anything else is written; on SQLite a write transaction holds
the database's write lock from its start (``BEGIN IMMEDIATE``), so the lookup and the
task's insert can have no race between them. Every statement here runs on the cursor of
the task store's open write (or read) transaction.
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
# The key's own row and, in the same statement, a stored task opened under the key (the
# last column says which is which): one read for a key not seen.
_LOOKUP = (
    f"SELECT task_id, expires_at_ms, retained_task, 1 FROM {_TABLE} "
    "WHERE owner = :owner AND idempotency_key = :key "
    f"UNION ALL SELECT id, key_expires_at_ms, NULL, 0 FROM {tasks.name} "
    "WHERE owner = :owner AND idempotency_key = :key"
)
_REMEMBER = (
    f"INSERT INTO {_TABLE} (owner, idempotency_key, task_id, expires_at_ms) "
    "VALUES (:owner, :key, :task_id, :expires_at_ms)"
)
_RETAIN = (
    f"INSERT INTO {_TABLE} (owner, idempotency_key, task_id, expires_at_ms, retained_task) "
    "VALUES (:owner, :key, :task_id, :expires_at_ms, :retained) "
    "ON CONFLICT (owner, idempotency_key) DO UPDATE SET retained_task = :retained"
)
_PURGE = f"DELETE FROM {_TABLE} WHERE expires_at_ms < :before"


class SQLKeyBook:
    def __init__(self, engine: Engine, retention: timedelta) -> None:
        check_retention(retention)
        self.races = engine.dialect.name != "sqlite"  # replicas may race for a key
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
        after the window, for a second window."""
        cursor.execute(self._sql["lookup"], {"owner": owner, "key": key})
        rows = cursor.fetchall()
        if not rows:
            return None
        own = [row for row in rows if row[3]]  # the key's own row, if it has one
        task_id, expires_at_ms, retained, _ = own[0] if own else rows[0]
        held_by_task = not own
        if expires_at_ms is not None and self._refused(expires_at_ms, now_ms, held_by_task):
            raise errors.IdempotencyKeyExpired(int(self.retention.total_seconds()))
        return task_id, json.loads(retained) if retained is not None else None

    def _refused(self, expires_at_ms: int, now_ms: int, held_by_task: bool) -> bool:
        """Whether a key that expired at ``expires_at_ms`` is refused now: its own row
        until it is purged; a key its task's row holds for the refusal window only (after
        it, the key is forgotten as a purged row is, and names its task while it lasts)."""
        if now_ms < expires_at_ms:
            return False
        return not held_by_task or not self._forgotten(expires_at_ms, now_ms)

    def _forgotten(self, expires_at_ms: int, now_ms: int) -> bool:
        """Whether a key that expired at ``expires_at_ms`` is past its refusal window (its
        own row is purged then, :meth:`purge`)."""
        return now_ms >= expires_at_ms + self._retention_ms

    def expiry(self, now_ms: int) -> int:
        """When a key first used at ``now_ms`` expires."""
        return now_ms + self._retention_ms

    def opening(self, cursor: DBAPICursor, owner: str, key: str, task_id: str, now_ms: int) -> None:
        """What a task opened under ``key`` needs first: expired keys purged now and then,
        and, where replicas race for a key, the key's own row (see the module)."""
        self.purge(cursor, now_ms)
        if self.races:
            self._remember(cursor, owner, key, task_id, now_ms)

    def _remember(
        self, cursor: DBAPICursor, owner: str, key: str, task_id: str, now_ms: int
    ) -> None:
        values = {
            "owner": owner,
            "key": key,
            "task_id": task_id,
            "expires_at_ms": self.expiry(now_ms),
        }
        cursor.execute(self._sql["remember"], values)

    def retain(self, cursor: DBAPICursor, evicted: Sequence[Sequence[Any]], now_ms: int) -> None:
        """Keep the final rows of evicted tasks with their keys, each row read as the task
        store's columns followed by its key and the key's expiry; a key whose refusal
        window is over is forgotten with its task, as its purged row would be."""
        kept = [
            {
                "owner": row[1],
                "key": row[-2],
                "task_id": row[0],
                "expires_at_ms": row[-1],
                "retained": dumps(list(row[:-2])),
            }
            for row in evicted
            if row[-2] is not None and row[-1] is not None and not self._forgotten(row[-1], now_ms)
        ]
        if kept:
            cursor.executemany(self._sql["retain"], kept)

    def purge(self, cursor: DBAPICursor, now_ms: int) -> None:
        """Drop keys past their refusal window (a second window after they expired)."""
        if self._purged_at is not None and now_ms - self._purged_at < self._purge_every_ms:
            return
        cursor.execute(self._sql["purge"], {"before": now_ms - self._retention_ms})
        self._purged_at = now_ms
