"""A run's deadline on the event loop's clock: how long is left, and the error once it is not."""

from __future__ import annotations

import asyncio

from coordinator.errors import LimitReached

RUN_DEADLINE_EXCEEDED = "run_deadline_exceeded"


class RunClock:
    """The run's deadline on the event loop's clock."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends = asyncio.get_running_loop().time() + seconds

    def left(self) -> float:
        return self._ends - asyncio.get_running_loop().time()

    def check(self) -> float:
        """The seconds left, or LimitReached once the deadline has passed."""
        left = self.left()
        if left <= 0:
            raise self.expired("before the next step")
        return left

    def expired(self, when: str) -> LimitReached:
        return LimitReached(
            f"the run's deadline of {self.seconds:g} s passed {when}", RUN_DEADLINE_EXCEEDED
        )
