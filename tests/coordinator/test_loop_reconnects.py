"""A kept-alive connection whose remote went away is replaced, on either event loop.

uvloop once broke this inside the HTTP stack (the next request on a pooled connection
whose peer was killed failed with ``'NoneType' object has no attribute 'getpeername'``),
which is why it was not the coordinator's default. Real processes: remote_risk answers
once on each of the client's two pools (httpx's, for a card, and the small keep-alive
client's, for a JSON-RPC call), is killed with SIGKILL and started again on the same port;
the same client must reach it again on both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.errors import RemoteA2AError
from coordinator.remote.wire.client import A2AClient
from tests.processes import RemoteRiskProcess, registered

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    pass
else:
    LOOPS["uvloop"] = uvloop.new_event_loop


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_killed_and_restarted_remote_is_reached_again(tmp_path: Path, loop: str) -> None:
    with registered(tmp_path) as (_, remote), asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        assert runner.run(_both_pools(remote)) == ("card", "answered") * 2


async def _both_pools(remote: RemoteRiskProcess) -> tuple[str, ...]:
    async with A2AClient() as client:
        first = (await _card(client, remote), await _rpc(client, remote))
        remote.kill()
        remote.start()
        return (*first, await _card(client, remote), await _rpc(client, remote))


async def _card(client: A2AClient, remote: RemoteRiskProcess) -> str:
    fetched = await client.fetch_card(remote.base_url)
    return "card" if fetched.card.name else "no name"


async def _rpc(client: A2AClient, remote: RemoteRiskProcess) -> str:
    """A GetTask without a token: refused by the remote (a typed A2A error, not a
    transport failure), which takes a request and its answer over the connection."""
    with pytest.raises(RemoteA2AError):
        await client.call_raw(remote.base_url + "/a2a/jsonrpc", "GetTask", {"id": "t-1"}, None)
    return "answered"
