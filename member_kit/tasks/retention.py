"""Idempotency keys remembered for a retention window, not for as long as their task is kept.

A send that opens a task under ``metadata.idempotencyKey`` records the key, its task and
when the key expires: ``retention`` after its first use (24 hours by default). Until
then a send with the same key (from the same owner) is answered with that task and
creates nothing, also after the task itself was evicted to make room: eviction keeps the
task's final form with its key, so the answer is the task as it ended. After the window a
send with the key is refused with :class:`~member_kit.errors.IdempotencyKeyExpired`
(reason ``idempotency_key_expired``) rather than done again; that refusal is given for a
second window, after which the key is forgotten.

The window must outlast any retry of a handoff: its lease plus the delay before a
recovery sends it again. A retry beyond it also carries a delegation token minted for
the same run, and tokens live at most the verifier's maximum lifetime (10 minutes by
default), so with the default window a retry that late is refused for its token as well.
Used token ids are kept until the token's ``exp`` plus the verifier's leeway (see
:mod:`member_kit.trust.replay`), independently of task eviction too.

:class:`KeyBook` keeps keys in memory for :class:`~member_kit.tasks.memory.TaskStore`;
:mod:`member_kit.tasks.sql_keys` keeps them in the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from member_kit import errors

DEFAULT_RETENTION = timedelta(hours=24)
# Keys past their refusal window are dropped at most this often.
PURGE_INTERVAL = timedelta(seconds=60)

T = TypeVar("T")


@dataclass
class KeyEntry(Generic[T]):
    task_id: str
    expires_at: datetime
    retained: T | None = None


def check_retention(retention: timedelta) -> None:
    if retention <= timedelta(0):
        raise ValueError("the idempotency retention window must be positive")


def refuse_if_expired(expires_at: datetime, now: datetime, retention: timedelta) -> None:
    if now >= expires_at:
        raise errors.IdempotencyKeyExpired(int(retention.total_seconds()))


class KeyBook(Generic[T]):
    """Keys by ``(owner, key)`` with their task and, once it was evicted, its final form."""

    def __init__(self, retention: timedelta, clock: Callable[[], datetime]) -> None:
        check_retention(retention)
        self.retention = retention
        self._clock = clock
        self._entries: dict[tuple[str, str], KeyEntry[T]] = {}
        self._by_task: dict[str, tuple[str, str]] = {}
        self._purged_at: datetime | None = None

    def lookup(self, owner: str, key: str) -> KeyEntry[T] | None:
        """The key's entry while it is retained; raises IdempotencyKeyExpired after."""
        entry = self._entries.get((owner, key))
        if entry is not None:
            refuse_if_expired(entry.expires_at, self._clock(), self.retention)
        return entry

    def remember(self, owner: str, key: str, task_id: str) -> None:
        now = self._clock()
        self._purge(now)
        self._entries[(owner, key)] = KeyEntry(task_id, now + self.retention)
        self._by_task[task_id] = (owner, key)

    def retain(self, task_id: str, final: T) -> None:
        """The task of a key is evicted: keep its final form with the key."""
        name = self._by_task.pop(task_id, None)
        entry = self._entries.get(name) if name is not None else None
        if entry is not None:
            entry.retained = final

    def _purge(self, now: datetime) -> None:
        if self._purged_at is not None and now - self._purged_at < PURGE_INTERVAL:
            return
        self._purged_at = now
        gone = [
            name for name, entry in self._entries.items() if entry.expires_at + self.retention < now
        ]
        for name in gone:
            entry = self._entries.pop(name)
            self._by_task.pop(entry.task_id, None)
