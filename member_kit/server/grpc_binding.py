"""A2A's gRPC binding: the ``A2AService`` generated from ``a2a.proto``, served beside HTTP.

Each RPC becomes the same ``(method, params)`` a JSON-RPC call carries (the request
message as ProtoJSON) and goes through the same
:class:`~member_kit.server.jsonrpc.Dispatcher`, so the delegation token and every trust
check apply identically. The bearer token and ``A2A-Version`` travel in the call's
metadata (``authorization``, ``a2a-version``); the token is first authenticated from the
metadata alone, as the HTTP edge does before reading a body. An error ends the call with
the spec table's gRPC code and a ``google.rpc.Status`` with ``ErrorInfo`` in
``grpc-status-details-bin``. ``SendStreamingMessage`` and ``SubscribeToTask`` are server
streams of ``StreamResponse``. Fields a request carries that the proto does not define
are ignored and counted (``remote_risk_ignored_fields_total{binding="grpc"}``), as on
the other bindings.

:class:`GRPCServer` runs a ``grpc.aio`` server in the service's process and event loop
(started and stopped with the app's lifespan), on a private loopback port behind
:class:`~agent_cards.edge.grpc_front.GRPCFront` on the public one, which admits
connections per client address as the HTTP edge does; calls in flight are counted per
the client address the front says a connection stands for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel
from starlette.requests import Request

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.bindings.protojson import proto_dict, to_proto, unknown_paths
from agent_cards.bindings.status import grpc_code, status_proto
from agent_cards.edge.grpc_front import GRPCFront, split_address
from agent_cards.edge.grpc_limits import peer_address, peer_host, server_options
from agent_cards.edge.limits import EdgeLimits
from agent_cards.edge.protocol import ConnectionGate
from contracts.wire import VERSION_HEADER
from member_kit import errors
from member_kit.server.authorization.hook import AUTHENTICATED_STATE
from member_kit.server.jsonrpc import Dispatcher, check_version
from member_kit.telemetry.http import observed_rpc
from member_kit.telemetry.observed import Telemetry

logger = logging.getLogger(__name__)

BINDING = "grpc"
SERVICE = "lf.a2a.v1.A2AService"
STATUS_DETAILS = "grpc-status-details-bin"
Authenticate = Callable[[Request], Awaitable[Any]]
# The client address a gRPC peer string stands for (None: a connection no edge admitted).
ClientOf = Callable[[str], str | None]
NOT_ADMITTED = "connection_not_admitted"
# The private port the gRPC server listens on, behind the front door.
BACKEND_ADDRESS = "127.0.0.1:0"

# What each RPC answers with (None: a stream of StreamResponse).
RESPONSES: dict[str, type[ProtoMessage] | None] = {
    "SendMessage": a2a_pb2.SendMessageResponse,
    "SendStreamingMessage": None,
    "GetTask": a2a_pb2.Task,
    "ListTasks": a2a_pb2.ListTasksResponse,
    "CancelTask": a2a_pb2.Task,
    "SubscribeToTask": None,
    "CreateTaskPushNotificationConfig": a2a_pb2.TaskPushNotificationConfig,
    "GetTaskPushNotificationConfig": a2a_pb2.TaskPushNotificationConfig,
    "ListTaskPushNotificationConfigs": a2a_pb2.ListTaskPushNotificationConfigsResponse,
    "GetExtendedAgentCard": a2a_pb2.AgentCard,
    "DeleteTaskPushNotificationConfig": empty_pb2.Empty,
}


def request_of(method: str, context: grpc.aio.ServicerContext) -> Request:
    """The call as the request the authorizer reads: its metadata as headers."""
    headers = [
        (key.lower().encode("latin-1"), str(value).encode("latin-1"))
        for key, value in context.invocation_metadata() or ()
        if not key.endswith("-bin")
    ]
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/{SERVICE}/{method}",
        "headers": headers,
        "query_string": b"",
        "state": {},
    }
    return Request(scope)


class A2AServicer(a2a_pb2_grpc.A2AServiceServicer):
    """Every RPC of the generated service, each through :meth:`_unary` or :meth:`_stream`."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        authenticate: Authenticate | None,
        calls: ConnectionGate | None = None,
        client_of: ClientOf = peer_host,
    ) -> None:
        self._dispatcher = dispatcher
        self._telemetry = dispatcher.telemetry
        self._authenticate = authenticate
        self._calls = calls or ConnectionGate(EdgeLimits())
        self._client_of = client_of

    @contextmanager
    def _admitted(self, context: grpc.aio.ServicerContext) -> Iterator[str | None]:
        """The call counted in against its client's calls in flight, or the reason not."""
        client = self._client_of(context.peer())
        refused = NOT_ADMITTED if client is None else self._calls.admit(client)
        try:
            yield refused
        finally:
            if client is not None and refused is None:
                self._calls.release(client)

    async def _result(
        self, method: str, message: ProtoMessage, context: grpc.aio.ServicerContext
    ) -> BaseModel | AsyncIterator[BaseModel]:
        request = request_of(method, context)
        if self._authenticate is not None:
            request.scope["state"][AUTHENTICATED_STATE] = await self._authenticate(request)
        check_version(request.headers.get(VERSION_HEADER))
        self._telemetry.ignored_fields(BINDING, unknown_paths(message))
        return await self._dispatcher.call(request, method, proto_dict(message), BINDING)

    async def _unary(
        self, method: str, message: ProtoMessage, context: grpc.aio.ServicerContext
    ) -> ProtoMessage:
        response_type = RESPONSES[method]
        assert response_type is not None
        with self._observed(method, context), self._admitted(context) as refused:
            if refused is not None:
                await too_many(context, refused, self._telemetry)
            try:
                result = await self._result(method, message, context)
                if not isinstance(result, BaseModel):
                    raise errors.InternalError(f"{method} answered a stream")
                return to_proto(result, response_type)
            except errors.A2AError as error:
                await abort(context, error, self._telemetry)
            except Exception:
                logger.exception("gRPC %s failed unexpectedly", method)
                await abort(context, errors.InternalError("internal error"), self._telemetry)
        raise AssertionError("abort returns only by raising")

    async def _stream(
        self, method: str, message: ProtoMessage, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ProtoMessage]:
        with self._observed(method, context), self._admitted(context) as refused:
            if refused is not None:
                await too_many(context, refused, self._telemetry)
            try:
                result = await self._result(method, message, context)
                if isinstance(result, BaseModel):
                    raise errors.InternalError(f"{method} answered one result")
                async for event in result:
                    yield to_proto(event, a2a_pb2.StreamResponse)
            except errors.A2AError as error:
                await abort(context, error, self._telemetry)
            except Exception:
                logger.exception("gRPC stream %s failed unexpectedly", method)
                await abort(context, errors.InternalError("internal error"), self._telemetry)

    def _observed(
        self, method: str, context: grpc.aio.ServicerContext
    ) -> AbstractContextManager[None]:
        return observed_call(self._telemetry, method, context, self._client_of(context.peer()))

    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await self._unary("SendMessage", request, context)

    async def SendStreamingMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        async for event in self._stream("SendStreamingMessage", request, context):
            yield event

    async def GetTask(self, request: Any, context: Any) -> Any:
        return await self._unary("GetTask", request, context)

    async def ListTasks(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTasks", request, context)

    async def CancelTask(self, request: Any, context: Any) -> Any:
        return await self._unary("CancelTask", request, context)

    async def SubscribeToTask(self, request: Any, context: Any) -> AsyncIterator[Any]:
        async for event in self._stream("SubscribeToTask", request, context):
            yield event

    async def CreateTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("CreateTaskPushNotificationConfig", request, context)

    async def GetTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("GetTaskPushNotificationConfig", request, context)

    async def ListTaskPushNotificationConfigs(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTaskPushNotificationConfigs", request, context)

    async def GetExtendedAgentCard(self, request: Any, context: Any) -> Any:
        return await self._unary("GetExtendedAgentCard", request, context)

    async def DeleteTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("DeleteTaskPushNotificationConfig", request, context)


def observed_call(
    telemetry: Telemetry,
    method: str,
    context: grpc.aio.ServicerContext,
    client: str | None = None,
) -> AbstractContextManager[None]:
    """The call's span, count and access line in ``telemetry``
    (:func:`member_kit.telemetry.http.observed_rpc`), naming ``client`` (the address the
    front door admitted) when known, else the peer."""
    metadata = {
        key.lower(): str(value)
        for key, value in context.invocation_metadata() or ()
        if not key.endswith("-bin")
    }
    return observed_rpc(telemetry, method, metadata, client or context.peer())


async def too_many(context: grpc.aio.ServicerContext, reason: str, telemetry: Telemetry) -> None:
    """Refuse a call past the client's calls in flight (or all of them), or on a connection
    the front door did not admit, as the HTTP edge refuses a connection past its limits:
    RESOURCE_EXHAUSTED with the reason."""
    telemetry.note(a2a_error=reason)
    message = f"{reason}: too many calls in flight; try again later"
    if reason == NOT_ADMITTED:
        message = f"{reason}: connect through the service's gRPC port"
    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


async def abort(
    context: grpc.aio.ServicerContext, error: errors.A2AError, telemetry: Telemetry
) -> None:
    """End the call with ``error``'s gRPC code and its Status (ErrorInfo) in the trailers
    (its reason noted for the call's access line)."""
    telemetry.note(a2a_error=error.kind.reason)
    over_http = error.status_over_http
    name, _ = grpc_code(error.kind, over_http)
    status = status_proto(error.kind, error.message, error.metadata, over_http)
    logger.info("gRPC answered %s: %s", name, error.message)
    await context.abort(
        grpc.StatusCode[name],
        error.message,
        trailing_metadata=((STATUS_DETAILS, status.SerializeToString()),),
    )


class GRPCServer:
    """The gRPC binding on ``address`` (host:port), in the running event loop: the front
    door there, the gRPC server on a private loopback port behind it."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        authenticate: Authenticate | None,
        address: str,
        *,
        limits: EdgeLimits | None = None,
        refused: Callable[[str], None] | None = None,
    ) -> None:
        self._limits = limits or EdgeLimits()
        self._dispatcher = dispatcher
        self._authenticate = authenticate
        # a connection the front door refuses: counted in the dispatcher's app, by reason
        self._refused = refused or dispatcher.telemetry.grpc_connection_refused
        self.address = address
        self._server: grpc.aio.Server | None = None
        self._front: GRPCFront | None = None

    async def start(self) -> None:
        """Listen under the HTTP edge's limits (:mod:`agent_cards.edge.grpc_limits`): a
        connection past a client's cap is refused by the front door, a request larger
        than the body limit by gRPC itself with RESOURCE_EXHAUSTED, and so is a call
        past a client's calls in flight."""
        server = grpc.aio.server(options=server_options(self._limits))
        port = server.add_insecure_port(BACKEND_ADDRESS)
        if port == 0:
            raise OSError(f"cannot listen for gRPC on {BACKEND_ADDRESS}")
        backend = (split_address(BACKEND_ADDRESS)[0], port)
        front = GRPCFront(self._limits, self.address, backend, self._refused)
        servicer = A2AServicer(
            self._dispatcher,
            self._authenticate,
            ConnectionGate(self._limits),
            client_of=lambda peer: _client(front, peer),
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)
        await server.start()
        self._server = server
        await front.start()
        self._front = front

    async def stop(self) -> None:
        if self._front is not None:
            await self._front.stop()
            self._front = None
        if self._server is not None:
            await self._server.stop(grace=1)
            self._server = None


def _client(front: GRPCFront, peer: str) -> str | None:
    """The client a backend peer (the relay's end of a connection) stands for."""
    end = peer_address(peer)
    return front.client_of(end) if end is not None else None
