"""The gRPC binding of A2A v1.0 on the modules generated from the normative ``a2a.proto``.

``A2A-Version``, the bearer token and the trace context travel as call metadata. Each
call has the client's total deadline (a stream: one deadline for the whole stream), each
message the client's byte cap (``grpc.max_receive_message_length``) and a stream the
total cap; unary calls wait in the client's plain-request slots. An error's
``google.rpc.Status`` (``grpc-status-details-bin``) is decoded and its ``ErrorInfo``
names the A2A error, as for HTTP+JSON (:mod:`coordinator.remote.wire.wire_errors`).

Messages cross into our wire models through the servers' own ProtoJSON mapping
(:mod:`agent_cards.bindings.protojson`: proto3 defaults a model requires put back, whole
numbers out of a ``Struct`` read as integers).

The interface's URL is ``host:port``: plaintext to a loopback host, TLS otherwise;
``grpc://`` or ``http://`` asks for plaintext and ``grpcs://`` or ``https://`` for TLS.
The channel dials the host and port :func:`~coordinator.remote.wire.endpoints.grpc_target`
read from it (the ones the destination rule checked), as ``dns:///host:port``; gRPC's
own target syntax in a card is refused there, never handed to gRPC.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2
from pydantic import BaseModel

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.bindings.protojson import from_proto, proto_dict, to_proto
from contracts.a2a_errors import ERROR_INFO_TYPE
from contracts.wire import (
    PROTOCOL_VERSION,
    VERSION_HEADER,
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from coordinator.authority import holder
from coordinator.errors import FederationError, ProtocolError, TransportError, translated
from coordinator.remote.wire import traced
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.endpoints import grpc_target
from coordinator.remote.wire.transport import GRPC, Interface
from coordinator.remote.wire.wire_errors import remote_error
from coordinator.telemetry import tracing

# The service every call's path names (a holder's proof's htu ends in /SERVICE/<rpc>).
SERVICE = "lf.a2a.v1.A2AService"

STATUS_DETAILS_KEY = "grpc-status-details-bin"
ModelT = TypeVar("ModelT", bound=BaseModel)
ProtoT = TypeVar("ProtoT", bound=Message)


def channel_target(url: str) -> tuple[str, bool]:
    """The ``host:port`` to dial and whether to use TLS (``grpc_target_invalid`` for a URL
    in any other form than A2A's)."""
    target = grpc_target(url)
    return target.authority, target.tls


class GrpcTransport:
    """One gRPC interface of one agent."""

    def __init__(self, client: A2AClient, interface: Interface, origin: str | None = None) -> None:
        """``origin``: the agent's public origin (its card's), which a holder's proof
        names with the call's path (docs/delegation-token.md, holder-bound tokens)."""
        self.client = client
        self.interface = interface
        self._origin = origin
        self._dialed = grpc_target(interface.url)
        self._target, self._tls = self._dialed.authority, self._dialed.tls

    @property
    def endpoint(self) -> str:
        return self.interface.url

    def channel(self) -> grpc.aio.Channel:
        """The client's channel to the checked target (made on first use, shared by the
        interfaces of every agent at that target); idle after the client's
        ``idle_channel_seconds`` without a call."""
        limits = self.client.limits
        options = [
            ("grpc.max_receive_message_length", limits.max_response_bytes),
            ("grpc.client_idle_timeout_ms", max(1000, int(limits.idle_channel_seconds * 1000))),
        ]

        def make() -> grpc.aio.Channel:
            if self._tls:
                credentials = grpc.ssl_channel_credentials()
                return grpc.aio.secure_channel(self._dialed.target, credentials, options=options)
            return grpc.aio.insecure_channel(self._dialed.target, options=options)

        async def close(channel: grpc.aio.Channel) -> None:
            await channel.close()

        return self.client.shared(f"grpc:{self._dialed.target}:{self._tls}", make, close)

    def _stub(self) -> a2a_pb2_grpc.A2AServiceStub:
        return a2a_pb2_grpc.A2AServiceStub(self.channel())

    def _request(self, request: Any, proto: type[ProtoT]) -> ProtoT:
        if self.interface.tenant and request.tenant is None:
            request = request.model_copy(update={"tenant": self.interface.tenant})
        with translated("encoding a gRPC request"):
            return to_proto(request, proto)

    def _metadata(
        self, headers: Mapping[str, str] | None, rpc: str, trace: bool = True
    ) -> list[tuple[str, str]]:
        sent: dict[str, str] = {VERSION_HEADER: PROTOCOL_VERSION}
        sent.update({k: v for k, v in (headers or {}).items() if k.lower() != "content-type"})
        if self._origin is not None:  # a holder-bound token's proof for this very call
            sent.update(holder.proof_headers(sent, "POST", f"{self._origin}/{SERVICE}/{rpc}"))
        if trace:
            tracing.inject(sent)
        return [(k.lower(), v) for k, v in sent.items()]

    # --- unary calls ------------------------------------------------------------------------

    async def send_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse:
        proto = self._request(request, a2a_pb2.SendMessageRequest)
        answer = await self._unary("SendMessage", proto, headers)
        return self._parsed("SendMessage", answer, SendMessageResponse)

    async def get_task(
        self, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        answer = await self._unary(
            "GetTask", self._request(request, a2a_pb2.GetTaskRequest), headers
        )
        return self._parsed("GetTask", answer, Task)

    async def cancel_task(
        self, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        proto = self._request(request, a2a_pb2.CancelTaskRequest)
        return self._parsed("CancelTask", await self._unary("CancelTask", proto, headers), Task)

    async def extended_card(self, headers: Mapping[str, str]) -> dict[str, Any]:
        proto = a2a_pb2.GetExtendedAgentCardRequest(tenant=self.interface.tenant or "")
        answer = await self._unary("GetExtendedAgentCard", proto, headers)
        return proto_dict(answer, AgentCard)

    async def _unary(self, rpc: str, proto: Message, headers: Mapping[str, str] | None) -> Message:
        call = getattr(self._stub(), rpc)
        timeout = self.client.limits.total_timeout
        with _grpc_errors(rpc, self.endpoint), traced.remote_call(rpc, self._target, GRPC):
            metadata = self._metadata(headers, rpc)
            async with self.client.request_slots:
                answer: Message = await call(proto, metadata=metadata, timeout=timeout)
                return answer

    def _parsed(self, rpc: str, answer: Message, model: type[ModelT]) -> ModelT:
        with translated(f"{rpc} to", self.endpoint):
            return from_proto(answer, model)

    # --- streams ----------------------------------------------------------------------------

    def stream_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]:
        proto = self._request(request, a2a_pb2.SendMessageRequest)
        return self._stream("SendStreamingMessage", proto, headers)

    def subscribe(
        self, task_id: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamResponse]:
        proto = a2a_pb2.SubscribeToTaskRequest(id=task_id, tenant=self.interface.tenant or "")
        return self._stream("SubscribeToTask", proto, headers)

    async def _stream(
        self, rpc: str, proto: Message, headers: Mapping[str, str] | None
    ) -> AsyncGenerator[StreamResponse, None]:
        sent = dict(self._metadata(headers, rpc, trace=False))
        cap = self.client.limits.max_stream_bytes
        with _grpc_errors(rpc, self.endpoint), traced.remote_stream(rpc, self._target, sent, GRPC):
            call = getattr(self._stub(), rpc)(
                proto, metadata=list(sent.items()), timeout=self.client.limits.total_timeout
            )
            total = 0
            try:
                async for event in call:
                    total += event.ByteSize()
                    if total > cap:
                        raise ProtocolError(f"stream exceeds {cap} bytes", "response_too_large")
                    with translated(f"{rpc} from", self.endpoint):
                        yield from_proto(event, StreamResponse)
            finally:
                call.cancel()


class _grpc_errors:
    """gRPC's exceptions, and the Status details they carry, as our own errors."""

    def __init__(self, rpc: str, endpoint: str) -> None:
        self._where = f"{rpc} to {endpoint}"

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, grpc.aio.AioRpcError):
            raise translate(exc, self._where) from None


def translate(exc: grpc.aio.AioRpcError, where: str) -> FederationError:
    code = exc.code()
    details = _status_details(exc.trailing_metadata())
    if not details:
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return TransportError(f"{where}: total deadline passed", "timeout")
        if code is grpc.StatusCode.UNAVAILABLE:
            return TransportError(f"{where}: cannot connect", "unreachable")
        if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
            return ProtocolError(f"{where}: a message exceeds the byte cap", "response_too_large")
        if code is grpc.StatusCode.CANCELLED:
            return TransportError(f"{where}: cancelled", "transport_error")
    try:
        return remote_error(code.name, exc.details() or "", details, where)
    except ProtocolError as refused:
        return refused


def _status_details(metadata: Any) -> list[dict[str, Any]]:
    """The ErrorInfo entries of the ``google.rpc.Status`` in the trailers, as ProtoJSON."""
    raw = next((v for k, v in (metadata or ()) if k == STATUS_DETAILS_KEY), None)
    if not isinstance(raw, bytes):
        return []
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except DecodeError:
        return []
    found: list[dict[str, Any]] = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
            entry = {"@type": ERROR_INFO_TYPE, "reason": info.reason, "domain": info.domain}
            found.append({**entry, "metadata": dict(info.metadata)})
    return found
