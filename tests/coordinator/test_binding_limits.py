"""HTTP+JSON and gRPC calls keep the client's limits and carry what every call carries.

A misbehaving agent on loopback (a Starlette app for HTTP+JSON, a gRPC server on our own
generated service for gRPC) answers too much, too late, with a redirect or with an error
body; each is one typed error with a stable reason, never a hang or a traceback. The
gRPC server also records the metadata it received: ``a2a-version``, the bearer token
and a ``traceparent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
)
from coordinator.errors import FederationError, ProtocolError, RemoteA2AError, TransportError
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.destinations import Destinations
from coordinator.remote.wire.transport import GRPC, HTTP_JSON, Interface
from tests.servers import free_port, running

LIMITS = ClientLimits(total_timeout=1.0, max_response_bytes=10_000, max_stream_bytes=20_000)
TASK = {"id": "t1", "status": {"state": "TASK_STATE_WORKING"}}
REQUEST = SendMessageRequest(
    message=Message(message_id="m", role=Role.USER, parts=[Part(data={"a": 1})])
)


async def big(request: Request) -> Response:
    return JSONResponse({"task": {**TASK, "metadata": {"pad": "x" * 50_000}}})


async def slow(request: Request) -> Response:
    await asyncio.sleep(3)
    return JSONResponse({"task": TASK})


async def redirect(request: Request) -> Response:
    return Response(status_code=307, headers={"Location": "http://127.0.0.1:9/elsewhere"})


async def unauthenticated(request: Request) -> Response:
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "UNAUTHENTICATED",
            "domain": "a2a-federation",
            "metadata": {"reason": "token_expired"},
        }
    ]
    body = {
        "error": {"code": 401, "status": "UNAUTHENTICATED", "message": "no", "details": details}
    }
    return JSONResponse(body, status_code=401, media_type="application/a2a+json")


async def endless(request: Request) -> Response:
    async def events() -> AsyncIterator[bytes]:
        status = b'{"statusUpdate": {"taskId": "t1", "contextId": "c", "status": '
        while True:
            yield b"data: " + status + b'{"state": "TASK_STATE_WORKING"}}}\n\n'
            await asyncio.sleep(0)

    return StreamingResponse(events(), media_type="text/event-stream")


def _app() -> Starlette:
    routes = [
        Route(f"/{name}/message:send", handler, methods=["POST"])
        for name, handler in (
            ("big", big), ("slow", slow), ("redirect", redirect), ("auth", unauthenticated)
        )
    ]  # fmt: skip
    routes.append(Route("/endless/message:stream", endless, methods=["POST"]))
    return Starlette(routes=routes)


@pytest.fixture(scope="module")
def rest() -> Iterator[str]:
    with running(_app()) as url:
        yield url


async def _send(url: str, binding: str = HTTP_JSON) -> Any:
    async with A2AClient(limits=LIMITS) as client:
        remote = transport_for(client, Interface(url, binding), Destinations(url))
        return await remote.send_message(REQUEST)


@pytest.mark.parametrize(
    ("path", "error", "reason"),
    [
        ("big", ProtocolError, "response_too_large"),
        ("slow", TransportError, "timeout"),
        ("redirect", TransportError, "http_status"),
    ],
)
def test_http_json_keeps_the_clients_limits(
    rest: str, path: str, error: type[FederationError], reason: str
) -> None:
    """Too big, too late, redirected: each a typed error, the redirect not followed."""
    with pytest.raises(error) as caught:
        asyncio.run(_send(f"{rest}/{path}"))
    assert caught.value.reason == reason


def test_an_http_json_error_body_is_the_a2a_error_it_names(rest: str) -> None:
    """A google.rpc.Status body with our ErrorInfo: the project's -32090 with its reason."""
    with pytest.raises(RemoteA2AError) as caught:
        asyncio.run(_send(f"{rest}/auth"))
    assert (caught.value.code, caught.value.error_info_reason) == (-32090, "UNAUTHENTICATED")


def test_an_http_json_stream_stops_at_its_cap(rest: str) -> None:
    async def read() -> int:
        count = 0
        async with A2AClient(limits=LIMITS) as client:
            remote = transport_for(
                client, Interface(f"{rest}/endless", HTTP_JSON), Destinations(rest)
            )
            async for _ in remote.stream_message(REQUEST):
                count += 1
        return count

    with pytest.raises(ProtocolError) as caught:
        asyncio.run(read())
    assert caught.value.reason == "response_too_large"


# --- gRPC ------------------------------------------------------------------------------


class Misbehaving(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """Answers SendMessage with an oversized task, GetTask too late; keeps the metadata."""

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}

    async def SendMessage(self, request: Any, context: Any) -> Any:
        self.metadata = {k: v for k, v in context.invocation_metadata()}
        task = a2a_pb2.Task(id="t1")
        task.status.state = a2a_pb2.TASK_STATE_WORKING
        task.metadata.update({"pad": "x" * 50_000})
        return a2a_pb2.SendMessageResponse(task=task)

    async def GetTask(self, request: Any, context: Any) -> Any:
        await asyncio.sleep(3)
        return a2a_pb2.Task(id=request.id)

    async def CancelTask(self, request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such task")


def test_grpc_keeps_the_clients_limits_and_carries_version_token_and_trace() -> None:
    """An oversized message is response_too_large, a late answer a timeout, a bare
    NOT_FOUND status TaskNotFound; the server saw a2a-version, the token and traceparent."""
    servicer = Misbehaving()

    async def scenario() -> list[FederationError]:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)
        port = free_port()
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        caught: list[FederationError] = []
        try:
            async with A2AClient(limits=LIMITS) as client:
                address = f"127.0.0.1:{port}"
                remote = transport_for(client, Interface(address, GRPC), Destinations(address))
                headers = {"Authorization": "Bearer t0ken"}
                for call in (
                    remote.send_message(REQUEST, headers),
                    remote.get_task(GetTaskRequest(id="t1")),
                    remote.cancel_task(CancelTaskRequest(id="t1")),
                ):
                    try:
                        await call
                    except FederationError as exc:
                        caught.append(exc)
        finally:
            await server.stop(0)
        return caught

    too_big, late, missing = asyncio.run(scenario())
    assert isinstance(too_big, ProtocolError) and too_big.reason == "response_too_large"
    assert isinstance(late, TransportError) and late.reason == "timeout"
    assert isinstance(missing, RemoteA2AError) and missing.code == -32001
    assert servicer.metadata["a2a-version"] == "1.0"
    assert servicer.metadata["authorization"] == "Bearer t0ken"
    assert servicer.metadata["traceparent"].startswith("00-")
