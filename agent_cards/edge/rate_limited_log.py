"""Log lines about what strangers send, at a rate they cannot raise.

A refusal of an unauthenticated request (no token, a connection past a client's cap) is
counted in a metric every time, but one log line per refusal would let anyone fill the
disk with them. :class:`RateLimitedLog` writes at most ``burst`` lines per key in each
window of ``interval_seconds``; the lines it holds back are counted, and the first line
written for that key in a later window says how many there were, so nothing refused goes
unmentioned. Keys must come from a bounded set (reason codes, never a client address).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_BURST = 5
DEFAULT_INTERVAL_SECONDS = 60.0


@dataclass
class _Window:
    started: float
    written: int = 0
    held_back: int = 0


class RateLimitedLog:
    """At most ``burst`` lines per key per ``interval_seconds`` to ``logger``."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = DEFAULT_BURST,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or interval_seconds <= 0:
            raise ValueError("burst and interval_seconds must be positive")
        self._logger = logger
        self._burst = burst
        self._interval = interval_seconds
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        """Write the line unless ``key`` used its burst in this window; True if written."""
        held_back = self._take(key)
        if held_back is None:
            return False
        if held_back:
            message += " (and %d more like it not logged in the window before)"
            args = (*args, held_back)
        self._logger.log(level, message, *args)
        return True

    def _take(self, key: str) -> int | None:
        """The lines held back in ``key``'s last window if this one may be written, else
        None (and it is counted as held back)."""
        now = self._clock()
        with self._lock:
            window = self._windows.get(key)
            carried = 0
            if window is None or now - window.started >= self._interval:
                carried = window.held_back if window is not None else 0
                window = self._windows[key] = _Window(now)
            if window.written >= self._burst:
                window.held_back += 1
                return None
            window.written += 1
            return carried
