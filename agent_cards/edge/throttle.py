"""Failed presentations of a secret, counted per key: past ``attempts`` failures within
``window`` seconds a key is held (429 with ``Retry-After``) until its oldest failure
leaves the window. The keys are what :class:`~agent_cards.edge.operator_secret.OperatorSecret`
counts a wrong token under: its client address and its fingerprint. The secrets are
long and random, so this is not what keeps them from being guessed (the strength rule
is); it keeps a script from trying wrong tokens at the speed of the network. The table
is bounded: past ``max_clients`` keys the stalest is forgotten.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_ATTEMPTS = 5
DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_MAX_CLIENTS = 1000
THROTTLED = "token_throttled"
THROTTLED_MESSAGE = "too many wrong tokens from here, or this one too often; try again later"


@dataclass
class FailureThrottle:
    attempts: int = DEFAULT_ATTEMPTS
    window: float = DEFAULT_WINDOW_SECONDS
    max_clients: int = DEFAULT_MAX_CLIENTS
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def retry_after(self, *keys: str) -> float | None:
        """Seconds until none of ``keys`` is held, or None if none is held now."""
        waits = [wait for wait in map(self._wait, keys) if wait is not None]
        return max(waits) if waits else None

    def failed(self, *keys: str) -> None:
        """Count one failure under each of ``keys``."""
        for key in keys:
            recent = self._recent(key)
            recent.append(self.clock())
            self._failures[key] = recent[-self.attempts :]
        while len(self._failures) > self.max_clients:
            stalest = min(self._failures, key=lambda name: self._failures[name][-1])
            del self._failures[stalest]

    def _wait(self, key: str) -> float | None:
        recent = self._recent(key)
        if len(recent) < self.attempts:
            return None
        return max(recent[0] + self.window - self.clock(), 0.0)

    def _recent(self, key: str) -> list[float]:
        now = self.clock()
        return [at for at in self._failures.get(key, []) if now - at < self.window]


def retry_after_header(wait: float) -> dict[str, str]:
    """The ``Retry-After`` header for a wait of ``wait`` seconds (at least one)."""
    return {"Retry-After": str(max(1, math.ceil(wait)))}
