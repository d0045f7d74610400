"""The event loop every coordinator entry point runs on: uvloop, or asyncio's own when
asked for (``FEDERATION_EVENT_LOOP=asyncio``) or when uvloop is not installed.

uvloop is the default because it costs less: a governed handoff took 0.17-0.31 ms less
of the coordinator's CPU on it (3.45-3.84 against 3.76-4.01 ms, three alternating runs
of 500 handoffs) and the whole suite passes on it. It was once the opt-in only: a pooled
keep-alive connection whose peer went away (a remote killed mid-task) made the next
request fail inside the HTTP stack on uvloop (``'NoneType' object has no attribute
'getpeername'``); the JSON-RPC requests now go through the coordinator's own keep-alive
client, and ``tests/coordinator/test_loop_reconnects.py`` kills and restarts a remote
under both pools on both loops. One rule for every entry point: the commands that run
one coroutine (``delegate``, ``demo``, ``recover``, ``register``, ``cancel``,
``evaluate``) call :func:`run`, and ``federation serve coordinator`` gives uvicorn
:func:`uvicorn_loop`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from agent_cards.runtime import collector

T = TypeVar("T")
LOOP_ENV = "FEDERATION_EVENT_LOOP"


def wants_uvloop() -> bool:
    """Whether uvloop is to run (unless ``asyncio`` is asked for) and can be imported."""
    if os.environ.get(LOOP_ENV, "uvloop").strip().lower() == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop unless asyncio's is asked for or uvloop is missing (then None:
    asyncio's default)."""
    if not wants_uvloop():
        return None
    import uvloop

    return uvloop.new_event_loop


def uvicorn_loop() -> str:
    """The same choice, named as uvicorn's ``loop`` setting."""
    return "uvloop" if wants_uvloop() else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop of :func:`loop_factory`, the collector set for
    a service (:func:`agent_cards.runtime.collector.settle`)."""
    collector.settle()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
