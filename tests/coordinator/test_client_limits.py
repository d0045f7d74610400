"""The A2A client keeps its requests within its pool and its polls within a budget."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from contracts.wire import Task, TaskState, TaskStatus
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.streaming import RemoteUpdates
from coordinator.remote.wire.client import A2AClient
from tests.servers import running


class Gauge:
    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def slow(self, request: Request) -> JSONResponse:
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.05)
        self.now -= 1
        return JSONResponse({"ok": True})


def test_requests_beyond_the_pool_wait_their_turn_in_the_client() -> None:
    """Twenty requests at once through a client of six connections (two kept for streams)
    reach the server at most four at a time, and all of them succeed."""
    gauge = Gauge()
    app = Starlette(routes=[Route("/slow", gauge.slow)])
    limits = ClientLimits(max_connections=6, max_streams=2)

    async def burst(url: str) -> list[object]:
        async with A2AClient(limits=limits) as client:
            calls = (client.fetch_json(f"{url}/slow", "gauge") for _ in range(20))
            return await asyncio.gather(*calls)

    with running(app) as url:
        answers = asyncio.run(burst(url))
    assert answers == [{"ok": True}] * 20
    assert gauge.most == limits.max_requests == 4


def test_polling_slows_down_as_more_tasks_are_polled() -> None:
    """With a budget of ten polls a second, twenty polled tasks may each poll only every
    two seconds; once they are closed the floor is gone again."""

    async def follow_many() -> tuple[float, float]:
        async with A2AClient(limits=ClientLimits(max_polls_per_second=10)) as client:
            task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.WORKING))
            followers = [RemoteUpdates(client, "http://127.0.0.1:9/", task, {}) for _ in range(20)]
            during = client.poll_interval_floor()
            for follower in followers:
                await follower.aclose()
                await follower.aclose()  # closing twice releases once
            return during, client.poll_interval_floor()

    during, after = asyncio.run(follow_many())
    assert during == 2.0
    assert after == 0.0
