"""Named pause points for crash tests.

A crash test needs the coordinator to be killed at a precise place (before dispatch,
after dispatch but before the answer is recorded, after the answer but before admission).
When ``FEDERATION_PAUSE_AT`` names the point the process reaches, it writes the file named
by ``FEDERATION_PAUSE_MARKER`` and waits there, so the test can SIGKILL it at that exact
point. Unset (always, outside tests), a pause point does nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

PAUSE_ENV = "FEDERATION_PAUSE_AT"
MARKER_ENV = "FEDERATION_PAUSE_MARKER"
POINTS = ("before_dispatch", "after_dispatch", "before_admission", "before_cancel_task")


def pause_point(name: str) -> None:
    if os.environ.get(PAUSE_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        Path(marker).write_text(name)
    while True:  # the test kills the process here
        time.sleep(1)


async def async_pause_point(name: str) -> None:
    """A pause point that keeps the event loop running (its signal handlers too), so a
    test can interrupt the process there as well as kill it."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        Path(marker).write_text(name)
    while True:
        await asyncio.sleep(1)
