"""The event loop every coordinator entry point runs on: uvloop when it is installed.

``federation serve coordinator`` runs under uvicorn, which picks uvloop itself; the
commands that run one coroutine to its end (``delegate``, ``demo``, ``recover``,
``register``, ``cancel``, ``evaluate``) call :func:`run`. Without uvloop (not installed,
or a platform it does not support) the standard asyncio loop is used; nothing else
differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it can be imported, else None (asyncio's default)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop of :func:`loop_factory`."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
