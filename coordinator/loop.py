"""The event loop every coordinator entry point runs on: asyncio's own, or uvloop when
asked for (``FEDERATION_EVENT_LOOP=uvloop``).

asyncio's loop is the default, uvloop the opt-in, for a measured reason: on uvloop a
pooled keep-alive connection whose peer went away (a remote killed mid-task) made the
next request fail inside the HTTP stack (anyio asks the closed transport for its socket,
which uvloop no longer gives: ``'NoneType' object has no attribute 'getpeername'``), and
``federation delegate`` ended with an internal error where asyncio's loop sees a closed
connection and opens another. uvloop costs less per request (issue 34); an operator who
wants it takes that risk knowingly. One rule for every entry point: the commands that run
one coroutine (``delegate``, ``demo``, ``recover``, ``register``, ``cancel``,
``evaluate``) call :func:`run`, and ``federation serve coordinator`` gives uvicorn
:func:`uvicorn_loop`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
LOOP_ENV = "FEDERATION_EVENT_LOOP"


def wants_uvloop() -> bool:
    """Whether uvloop was asked for and can be imported."""
    if os.environ.get(LOOP_ENV, "asyncio").strip().lower() != "uvloop":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked for and installed, else None (asyncio's default)."""
    if not wants_uvloop():
        return None
    import uvloop

    return uvloop.new_event_loop


def uvicorn_loop() -> str:
    """The same choice, named as uvicorn's ``loop`` setting."""
    return "uvloop" if wants_uvloop() else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop of :func:`loop_factory`."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
