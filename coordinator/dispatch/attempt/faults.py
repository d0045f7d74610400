"""Named pause points for crash tests.

A crash test needs the coordinator to be killed at a precise place (before dispatch,
after dispatch but before the answer is recorded, after the answer but before admission).
When ``FEDERATION_PAUSE_AT`` names the point the process reaches, it writes the file named
by ``FEDERATION_PAUSE_MARKER`` and waits there, so the test can SIGKILL it at that exact
point, or do something meanwhile and remove the file to let it go on. Unset (always,
outside tests), a pause point does nothing. The variable is read once, when the process
first reaches a pause point (a test sets it in the environment the process starts
with): a handoff passes several, and each read of the environment cost more than the
point's test.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from pathlib import Path

PAUSE_ENV = "FEDERATION_PAUSE_AT"
MARKER_ENV = "FEDERATION_PAUSE_MARKER"
POINTS = (
    "before_intent",
    "before_dispatch",
    "after_dispatch",
    "before_admission",
    "before_cancel_task",
    "retry_delay",
)


@functools.cache
def _paused_at() -> str | None:
    """The point this process pauses at, if any (``FEDERATION_PAUSE_AT``)."""
    return os.environ.get(PAUSE_ENV)


def pause_point(name: str) -> None:
    """Wait at ``name`` until the test kills the process, or removes the marker (then
    the process goes on: the test did something meanwhile, e.g. cancelled the run)."""
    if _paused_at() != name:
        return
    marker = _mark(name)
    while marker is None or marker.exists():
        time.sleep(0.05)


async def async_pause_point(name: str) -> None:
    """A pause point that keeps the event loop running (its signal handlers too), so a
    test can interrupt the process there as well as kill it or let it go on."""
    if _paused_at() != name:
        return
    marker = _mark(name)
    while marker is None or marker.exists():
        await asyncio.sleep(0.05)


def _mark(name: str) -> Path | None:
    marker = os.environ.get(MARKER_ENV)
    if not marker:
        return None
    Path(marker).write_text(name)
    return Path(marker)
