"""Failed presentations of a secret, counted per client address: past ``attempts``
failures within ``window`` seconds, that address is refused (429 with ``Retry-After``)
until the oldest failure leaves the window. The secrets are long and random, so this is
not what keeps them from being guessed; it keeps a script from trying at the speed of
the network. The table is bounded: past ``max_clients`` addresses the stalest is
forgotten. One rule for every secret either service checks: the console's login form,
the coordinator's API token, remote_risk's audit and metrics tokens.
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


@dataclass
class FailureThrottle:
    attempts: int = DEFAULT_ATTEMPTS
    window: float = DEFAULT_WINDOW_SECONDS
    max_clients: int = DEFAULT_MAX_CLIENTS
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def retry_after(self, client: str) -> float | None:
        """Seconds until ``client`` may try again, or None if it may now."""
        recent = self._recent(client)
        if len(recent) < self.attempts:
            return None
        return max(recent[0] + self.window - self.clock(), 0.0)

    def failed(self, client: str) -> None:
        recent = self._recent(client)
        recent.append(self.clock())
        self._failures[client] = recent[-self.attempts :]
        if len(self._failures) > self.max_clients:
            stalest = min(self._failures, key=lambda name: self._failures[name][-1])
            del self._failures[stalest]

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def _recent(self, client: str) -> list[float]:
        now = self.clock()
        return [at for at in self._failures.get(client, []) if now - at < self.window]


def retry_after_header(wait: float) -> dict[str, str]:
    """The ``Retry-After`` header for a wait of ``wait`` seconds (at least one)."""
    return {"Retry-After": str(max(1, math.ceil(wait)))}
