"""The transport for an interface: one place that knows every binding we speak.

:func:`transport_for` gives the :class:`~coordinator.remote.wire.transport.Transport` of an
interface chosen from a card, on a host the agent's destinations allow (the one check of
:mod:`coordinator.remote.wire.destinations`); :func:`transport_of` accepts a bare JSON-RPC
endpoint URL as well, for callers that name one (tests, the pilot's in-process peers).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from coordinator.errors import ProtocolError
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.destinations import Destinations, check_destination
from coordinator.remote.wire.http_json import HttpJsonTransport
from coordinator.remote.wire.transport import GRPC, HTTP_JSON, Interface, Transport
from coordinator.remote.wire.v03.transport import V03Transport


class JsonRpcTransport:
    """The JSON-RPC binding of A2A v1.0 on the client's own calls; the interface's tenant
    goes into every request that names none."""

    def __init__(self, client: A2AClient, interface: Interface) -> None:
        self.client = client
        self.interface = interface

    @property
    def endpoint(self) -> str:
        return self.interface.url

    def _tenanted(self, request: Any) -> Any:
        if self.interface.tenant and request.tenant is None:
            return request.model_copy(update={"tenant": self.interface.tenant})
        return request

    async def send_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse:
        return await self.client.send_message(self.endpoint, self._tenanted(request), headers)

    async def get_task(
        self, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        return await self.client.get_task(self.endpoint, self._tenanted(request), headers)

    async def cancel_task(
        self, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        return await self.client.cancel_task(self.endpoint, self._tenanted(request), headers)

    def stream_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]:
        return self.client.stream_message(self.endpoint, self._tenanted(request), headers)

    def subscribe(
        self, task_id: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamResponse]:
        return self.client.subscribe(self.endpoint, task_id, headers, self.interface.tenant)

    async def extended_card(self, headers: Mapping[str, str]) -> dict[str, Any]:
        params = {"tenant": self.interface.tenant} if self.interface.tenant else {}
        card = await self.client.call_raw(self.endpoint, "GetExtendedAgentCard", params, headers)
        if not isinstance(card, dict):
            raise ProtocolError(f"extended card from {self.endpoint} is not an object", "not_json")
        return card


def origin_of(url: str) -> str:
    """``scheme://authority`` of ``url``: an agent's public origin, from its card's URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def transport_for(client: A2AClient, interface: Interface, destinations: Destinations) -> Transport:
    """The transport that speaks ``interface``'s binding at its protocol version, once
    :func:`~coordinator.remote.wire.destinations.check_destination` allows its URL for the
    agent (``destinations``): no transport exists for a host the rule refuses."""
    check_destination(interface.url, destinations, interface.binding)
    if interface.legacy:
        return V03Transport(client, interface)
    if interface.binding == HTTP_JSON:
        return HttpJsonTransport(client, interface)
    if interface.binding == GRPC:
        # gRPC's modules load only for an agent that speaks it (process start-up time)
        from coordinator.remote.wire.grpc_transport import GrpcTransport

        return GrpcTransport(client, interface, origin_of(destinations.card_url))
    return JsonRpcTransport(client, interface)


def transport_of(client: A2AClient, target: str | Transport) -> Transport:
    """``target`` itself, or the JSON-RPC v1.0 transport of an endpoint URL."""
    if isinstance(target, str):
        return JsonRpcTransport(client, Interface(url=target))
    return target
