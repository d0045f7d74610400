"""One delegation token creates at most one task.

:class:`ReplayGuard` is the interface: :meth:`~ReplayGuard.claim_task_creation` records a
token's ``(issuer, jti)`` atomically and answers whether this was the first claim. An entry
is kept until the token has expired (plus the verifier's leeway), after which the token is
refused for being expired anyway. :class:`InMemoryReplayGuard` serves one process;
:class:`member_kit.trust.sql_replay.SQLReplayGuard` keeps the record in the service's database
(surviving a restart, shared by replicas) with an insert-if-absent.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from agent_cards.clock import utc_now

Clock = Callable[[], datetime]
DEFAULT_MAX_ENTRIES = 100_000


class ReplayGuardUnavailable(RuntimeError):
    """The guard cannot record the token (full, or its database unreachable); the request
    must fail closed."""


class ReplayGuardFull(ReplayGuardUnavailable):
    """The guard cannot record another token; the request must fail closed."""


class ReplayGuard(Protocol):
    def claim_task_creation(self, jti: str, exp: int, *, issuer: str) -> bool:
        """Record ``(issuer, jti)`` until ``exp``; ``False`` if it was already recorded."""
        ...


class InMemoryReplayGuard:
    """A bounded, thread-safe replay guard for a single process."""

    def __init__(
        self,
        clock: Clock = utc_now,
        *,
        leeway: timedelta = timedelta(seconds=30),
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self._clock = clock
        self._leeway = int(leeway.total_seconds())
        self._max_entries = max_entries
        self._entries: dict[tuple[str, str], int] = {}
        self._by_expiry: list[tuple[int, tuple[str, str]]] = []
        self._lock = threading.Lock()

    def claim_task_creation(self, jti: str, exp: int, *, issuer: str) -> bool:
        now = int(self._clock().timestamp())
        with self._lock:
            self._forget_expired(now)
            key = (issuer, jti)
            if key in self._entries:
                return False
            if len(self._entries) >= self._max_entries:
                raise ReplayGuardFull(f"replay guard holds {self._max_entries} live tokens")
            self._entries[key] = exp + self._leeway
            heapq.heappush(self._by_expiry, (exp + self._leeway, key))
            return True

    def __len__(self) -> int:
        return len(self._entries)

    def _forget_expired(self, now: int) -> None:
        while self._by_expiry and self._by_expiry[0][0] < now:
            _, key = heapq.heappop(self._by_expiry)
            self._entries.pop(key, None)
