"""Run a real ASGI app on a loopback port for the length of a test, and reserve ports.

The server is uvicorn in a background thread with its own event loop, so the test talks
to it over real HTTP exactly as another team's coordinator would.

Ports are chosen without a race between parallel test processes, as the bench chooses
them (:func:`bench.procs.free_port`, the one place): the kernel picks a port no socket
holds and a bound socket, never listening, keeps it until the test that reserved it ends,
so it stays ours between the moment it is chosen and the moment a server (in a thread or
a child process) listens on it, and across a restart on the same port within the test.
``tests/conftest.py`` releases a test's reservations when it ends
(:func:`bench.procs.release_ports`): held for a whole run they would push a worker's file
descriptors past what ``select()`` accepts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import uvicorn

from bench.procs import free_port

# How long a server started in a thread may take to listen: a bound on a hang, not a
# speed check. Generous, since `make test` runs twice as many workers as cores and a
# start can wait its turn for a core (10 s was once too little on a loaded machine).
START_SECONDS = 60.0


class _Server(uvicorn.Server):
    """uvicorn's server, stopped at once: its main loop checks ``should_exit`` every tenth
    of a second, so each server a test started cost that much again at its end."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._woken = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def stop(self) -> None:
        self.should_exit = True  # first: a main loop not yet running sees it at its first tick
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._woken.set)


@contextmanager
def running(app: Any, port: int | None = None, **options: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 and yield its base URL; stop it afterwards. ``options``
    go to ``uvicorn.Config`` (e.g. the bounded edge's protocol)."""
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **options
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        thread.join(timeout=10)
