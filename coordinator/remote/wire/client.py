"""The A2A client on httpx: the limits every binding shares, and the JSON-RPC binding.

:class:`A2AClient` owns what every binding shares: one pooled, bounded HTTP client (an
explicit per-phase timeout and a total deadline per call, no redirects, no proxy
settings from the environment, an uncompressed body read under a byte cap), the slots
plain requests and long-lived streams take, the poll budget, ``A2A-Version`` on every
request and the trace context; other bindings' long-lived connections (a gRPC channel)
are made and closed through it. :meth:`A2AClient.exchange` and
:meth:`A2AClient.stream_events` are the one bounded request and the one bounded SSE
reader the HTTP bindings use (see :mod:`coordinator.remote.wire.http_json`,
:mod:`coordinator.remote.wire.v03.transport`); :mod:`coordinator.remote.wire.bindings` gives the
transport of a chosen interface.

Its own calls are the JSON-RPC binding of A2A v1.0: every JSON-RPC error is raised as
:class:`~coordinator.errors.RemoteA2AError`; every transport or shape problem as the
matching :mod:`coordinator.errors` type. Streams (``SendStreamingMessage``,
``SubscribeToTask``) are read as Server-Sent Events under the same rules: one total
deadline for the whole stream, a cap on each event and on the whole stream; each event
is parsed strictly as a JSON-RPC response with the request's id whose result is a
``StreamResponse``. A refusal before the stream starts comes as a plain JSON-RPC error
and is raised like any other.

Pass your own ``httpx.AsyncClient`` (for instance one on ``httpx.ASGITransport``) to talk
to an app in memory; by default one pooled client is created and owned here, and the
plain JSON-RPC requests (a blocking ``SendMessage``, ``GetTask``, ``CancelTask``) go
through the small keep-alive client of :mod:`coordinator.remote.http.keepalive` instead, under
the same slots, deadline, caps and errors.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httpx
from pydantic import BaseModel

from agent_cards import tls
from contracts import strict_json
from contracts.wire import (
    AGENT_CARD_PATH,
    PROTOCOL_VERSION,
    VERSION_HEADER,
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    to_wire,
)
from coordinator.authority import holder
from coordinator.errors import ProtocolError, TransportError, translated
from coordinator.remote.http import bounded_reads
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.http.keepalive import KeepAlivePool
from coordinator.remote.wire import traced
from coordinator.remote.wire.jsonrpc import jsonrpc_result, stream_result
from coordinator.remote.wire.v03.card import card_model
from coordinator.telemetry import tracing

__all__ = ["A2AClient", "FetchedCard", "card_url_for"]

ResultT = TypeVar("ResultT", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class FetchedCard:
    card: AgentCard
    document: dict[str, Any]
    url: str
    etag: str | None


def card_url_for(url: str) -> str:
    """Accept either an agent's base URL or its full card URL."""
    if url.rstrip("/").endswith(".json"):
        return url
    return url.rstrip("/") + AGENT_CARD_PATH


class A2AClient:
    def __init__(
        self, http: httpx.AsyncClient | None = None, limits: ClientLimits | None = None
    ) -> None:
        self.limits = limits or ClientLimits()
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(self.limits.read_timeout, connect=self.limits.connect_timeout),
            follow_redirects=False,
            trust_env=False,
            verify=tls.verified(),
            limits=httpx.Limits(
                max_connections=self.limits.max_connections,
                max_keepalive_connections=self.limits.max_connections,
            ),
        )
        # The plain JSON-RPC requests' own small keep-alive client, only when the HTTP
        # client is ours too (one passed in, an in-memory app say, serves everything).
        self._keepalive = (
            KeepAlivePool(
                self.limits.connect_timeout,
                self.limits.read_timeout,
                self.limits.max_requests,
                self.limits.max_response_bytes,
            )
            if http is None
            else None
        )
        self._ids = itertools.count(1)
        self._open_streams = 0
        # Requests wait here, in order, rather than in the HTTP pool's queue, whose
        # bookkeeping grows with its length; together with the stream slots this keeps
        # every request within the pool's connections.
        self._request_slots = asyncio.Semaphore(self.limits.max_requests)
        self._pollers = 0
        # Connections of other bindings (a gRPC channel per target), closed with the client.
        self._shared: dict[str, Any] = {}
        self._closers: list[Callable[[], Awaitable[None]]] = []

    @property
    def keepalive(self) -> KeepAlivePool | None:
        """The small keep-alive client plain JSON-RPC requests go through, if this client
        has one (it has when it made its own HTTP client)."""
        return self._keepalive

    @property
    def request_slots(self) -> asyncio.Semaphore:
        """The plain-request slots every binding's unary calls wait in."""
        return self._request_slots

    def shared(self, key: str, make: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> T:
        """One long-lived resource per ``key`` (a gRPC channel), made on first use and
        closed with this client."""
        if key not in self._shared:
            made = self._shared[key] = make()
            self._closers.append(lambda: close(made))
        return cast(T, self._shared[key])

    def open_stream_slot(self) -> bool:
        """Reserve one of the bounded stream slots; False when all are taken."""
        if self._open_streams >= self.limits.max_streams:
            return False
        self._open_streams += 1
        return True

    def close_stream_slot(self) -> None:
        self._open_streams = max(0, self._open_streams - 1)

    def start_polling(self) -> None:
        """Count one more task followed by polling (see :meth:`poll_interval_floor`)."""
        self._pollers += 1

    def stop_polling(self) -> None:
        self._pollers = max(0, self._pollers - 1)

    def poll_interval_floor(self) -> float:
        """The shortest interval each poller may keep so that all of them together stay
        within ``max_polls_per_second``."""
        return self._pollers / self.limits.max_polls_per_second

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        closers, self._closers = self._closers, []
        self._shared.clear()
        for close in closers:
            await close()
        if self._owns_http:
            await self._http.aclose()
        if self._keepalive is not None:
            await self._keepalive.aclose()

    # --- discovery ------------------------------------------------------------------------

    async def fetch_card(self, url: str) -> FetchedCard:
        """GET an agent card and parse it strictly as an A2A v1.0 ``AgentCard``."""
        card_url = card_url_for(url)
        with translated("fetching agent card", card_url):
            status, headers, body = await self._get(card_url)
        if status != 200:
            raise TransportError(f"fetching agent card {card_url}: HTTP {status}", "card_http")
        with translated("reading agent card", card_url):
            document = strict_json.loads(body)
        if not isinstance(document, dict):
            raise ProtocolError(f"agent card {card_url} is not a JSON object", "not_json")
        with translated("reading agent card", card_url):
            card = card_model(document)
        return FetchedCard(card=card, document=document, url=card_url, etag=headers.get("etag"))

    async def fetch_json(self, url: str, what: str) -> Any:
        """GET a small JSON document (a JWK Set, say) under the same caps as every call."""
        with translated(f"fetching {what}", url):
            status, _, body = await self._get(url)
            if status != 200:
                raise TransportError(f"fetching {what} {url}: HTTP {status}", "http_status")
            return strict_json.loads(body)

    # --- the four operations --------------------------------------------------------------

    async def send_message(
        self, endpoint: str, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse:
        return await self._call(endpoint, "SendMessage", request, SendMessageResponse, headers)

    async def get_task(
        self, endpoint: str, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        return await self._call(endpoint, "GetTask", request, Task, headers)

    async def list_tasks(
        self, endpoint: str, request: ListTasksRequest, headers: Mapping[str, str] | None = None
    ) -> ListTasksResponse:
        return await self._call(endpoint, "ListTasks", request, ListTasksResponse, headers)

    async def cancel_task(
        self, endpoint: str, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        return await self._call(endpoint, "CancelTask", request, Task, headers)

    # --- streams --------------------------------------------------------------------------

    def stream_message(
        self, endpoint: str, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]:
        """``SendStreamingMessage``: the task (or one message), then its updates."""
        return self._stream(endpoint, "SendStreamingMessage", request, headers)

    def subscribe(
        self,
        endpoint: str,
        task_id: str,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> AsyncIterator[StreamResponse]:
        """``SubscribeToTask``: the task as it is now, then its updates until it settles."""
        request = SubscribeToTaskRequest(id=task_id, tenant=tenant)
        return self._stream(endpoint, "SubscribeToTask", request, headers)

    async def _stream(
        self,
        endpoint: str,
        method: str,
        params: BaseModel,
        headers: Mapping[str, str] | None,
    ) -> AsyncGenerator[StreamResponse, None]:
        request_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": to_wire(params)}
        sent = {"Content-Type": "application/json", **(headers or {})}
        events = self.stream_events(method, "POST", endpoint, strict_json.dumps(payload), sent)
        try:
            async for data in events:
                with translated(f"{method} to", endpoint):
                    yield stream_result(data, request_id, method, endpoint)
        finally:
            await events.aclose()

    async def stream_events(
        self,
        rpc: str,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        binding: str = "JSONRPC",
    ) -> AsyncGenerator[bytes, None]:
        """The ``data`` of each event of a streamed response (a plain body is one event),
        under one total deadline for the whole stream, in the stream's span. Shared by every
        binding that streams over HTTP."""
        sent = {
            VERSION_HEADER: PROTOCOL_VERSION,
            "Accept": "text/event-stream, application/json",
            "Accept-Encoding": "identity",
            **headers,
        }
        sent.update(holder.proof_headers(sent, method, url))  # a holder-bound token's proof
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.total_timeout
        with translated(f"{rpc} to", url), traced.remote_stream(rpc, url, sent, binding):
            request = self._http.build_request(method, url, content=body, headers=sent)
            response = await bounded_reads.before(
                deadline, self._http.send(request, stream=True), url
            )
            try:
                async for data in bounded_reads.events(response, deadline, url, self.limits):
                    yield data
            finally:
                await response.aclose()

    # --- plumbing -------------------------------------------------------------------------

    async def _call(
        self,
        endpoint: str,
        method: str,
        params: BaseModel,
        result_type: type[ResultT],
        headers: Mapping[str, str] | None,
    ) -> ResultT:
        result = await self.call_raw(endpoint, method, to_wire(params), headers)
        with translated(f"{method} to", endpoint):
            return result_type.model_validate(result)

    async def call_raw(
        self,
        endpoint: str,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str] | None,
    ) -> Any:
        """One JSON-RPC call: the ``result`` as received (its shape is the caller's to check)."""
        request_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        with translated(f"{method} to", endpoint), traced.remote_call(method, endpoint):
            status, _, body = await self._post(endpoint, strict_json.dumps(payload), headers)
            document = strict_json.loads(body) if body else None
            if not isinstance(document, dict):
                raise ProtocolError(
                    f"{method} to {endpoint}: HTTP {status} without a JSON-RPC body",
                    "not_jsonrpc",
                )
            return jsonrpc_result(document, request_id, method, endpoint)

    async def _get(self, url: str) -> tuple[int, httpx.Headers, bytes]:
        return await self.exchange("GET", url, None, {})

    async def _post(
        self, url: str, body: bytes, headers: Mapping[str, str] | None
    ) -> tuple[int, httpx.Headers, bytes]:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        return await self.exchange("POST", url, body, all_headers, keepalive=True)

    async def exchange(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        keepalive: bool = False,
    ) -> tuple[int, httpx.Headers, bytes]:
        """One bounded request: the status, headers and body (read under the cap), within
        the total deadline and one of the plain-request slots; the current trace context
        goes with it. Every binding over HTTP sends through here; ``keepalive`` lets the
        small keep-alive client carry it when this client has one and the URL suits it."""
        sent = {
            VERSION_HEADER: PROTOCOL_VERSION,
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            **headers,
        }
        sent.update(holder.proof_headers(sent, method, url))  # a holder-bound token's proof
        tracing.inject(sent)
        small = self._keepalive
        target = small.target(url, sent) if small is not None and keepalive else None
        try:
            async with asyncio.timeout(self.limits.total_timeout), self._request_slots:
                if small is not None and target is not None:
                    reply = await small.request(target, method, sent, body or b"")
                    return reply.status, httpx.Headers(reply.headers), reply.body
                request = self._http.build_request(method, url, content=body, headers=sent)
                response = await self._http.send(request, stream=True)
                try:
                    return (
                        response.status_code,
                        response.headers,
                        await bounded_reads.read_body(response, self.limits.max_response_bytes),
                    )
                finally:
                    await response.aclose()
        except TimeoutError:
            raise TransportError(f"{method} {url}: total deadline passed", "timeout") from None
