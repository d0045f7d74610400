"""How a handoff is sent: one blocking ``SendMessage``, or a send that returns at once.

A skill that answers at once is cheapest as one blocking ``SendMessage`` on a kept-alive
connection: the answer is the settled task, with nothing to stream or poll. A long task
would hold a connection (and one of the client's request slots) for its whole life that
way, so it is sent returning at once and followed by its stream or by polling, as the
agent's card allows. Which one a skill is, the coordinator learns from its answers: a
skill is sent blocking once a handoff to it settled within :data:`QUICK_SECONDS` of
being sent, and again returning at once as soon as one did not (a blocking answer that
is not settled, one that took longer, or a send that failed). The first handoff to a
skill is never blocking.

A blocking send holds one of the client's plain-request slots until it answers. With
every slot taken, it waits for one to free, for at most the time a skill that answers at
once takes (:attr:`SendModes.quick_seconds`): the slots are held by plain requests only
(sends, polls), each as short as that, so one frees within it unless the remote has
become slow; then the handoff is followed instead, on a stream slot or by polling.
Following a quick skill costs far more than waiting for a slot (a stream, its events, a
connection held): before the wait, a client with more handoffs in flight than slots
streamed the excess and spent a quarter more CPU on each handoff (issue 34).

What is learned is kept per client (one per process, shared by its handoffs), per agent
endpoint and skill.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from coordinator.remote.wire.client import A2AClient

# A handoff that settled within this many seconds of being sent was answered at once.
QUICK_SECONDS = 1.0
# Skills remembered per client; past this the oldest are forgotten (sent returning at once).
MAX_REMEMBERED = 4096


class SendModes:
    """Per ``(endpoint, skill)``: whether its last handoff settled at once."""

    def __init__(self, quick_seconds: float = QUICK_SECONDS) -> None:
        self.quick_seconds = quick_seconds
        self._quick: dict[tuple[str, str], bool] = {}

    def blocking(self, endpoint: str, skill: str) -> bool:
        """Whether to send the next handoff to ``skill`` at ``endpoint`` blocking."""
        return self._quick.get((endpoint, skill), False)

    def learned(self, endpoint: str, skill: str, settled_in: float | None) -> None:
        """A handoff to ``skill`` settled ``settled_in`` seconds after it was sent (None:
        its blocking answer was not settled, or the send failed)."""
        key = (endpoint, skill)
        self._quick.pop(key, None)
        if len(self._quick) >= MAX_REMEMBERED:
            del self._quick[next(iter(self._quick))]
        self._quick[key] = settled_in is not None and settled_in <= self.quick_seconds


async def _nothing(_: SendModes) -> None:
    return None


async def send_blocking(client: A2AClient, endpoint: str, skill: str) -> bool:
    """Whether ``client`` sends the next handoff to ``skill`` at ``endpoint`` blocking:
    the skill answers at once, and a plain-request slot is free or frees within the time
    such a skill answers in (see the module)."""
    modes = send_modes(client)
    if not modes.blocking(endpoint, skill):
        return False
    return await _slot_frees(client.request_slots, modes.quick_seconds)


async def _slot_frees(slots: asyncio.Semaphore, within: float) -> bool:
    """Whether one of ``slots`` is free, or frees within ``within`` seconds. The slot is
    not kept: the send takes one as every plain request does, in turn."""
    if not slots.locked():
        return True
    try:
        async with asyncio.timeout(within):
            await slots.acquire()
    except TimeoutError:
        return False
    slots.release()
    return True


def send_modes(client: A2AClient, make: Callable[[], SendModes] = SendModes) -> SendModes:
    """The modes learned by ``client``'s handoffs (made by ``make`` on first use)."""
    return client.shared("dispatch:send-modes", make, _nothing)
