"""An A2A v1.0 JSON-RPC client on httpx.

Every call sends ``A2A-Version: 1.0``, has an explicit per-phase timeout and a total
deadline, follows no redirects, ignores proxy settings from the environment, asks for an
uncompressed body and stops reading once the body exceeds a byte cap. Every JSON-RPC
error is raised as :class:`~coordinator.errors.RemoteA2AError`; every transport or shape
problem as the matching :mod:`coordinator.errors` type.

Pass your own ``httpx.AsyncClient`` (for instance one on ``httpx.ASGITransport``) to talk
to an app in memory; by default one pooled client is created and owned here.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from contracts import strict_json
from contracts.a2a_errors import reason_of
from contracts.wire import (
    AGENT_CARD_PATH,
    PROTOCOL_VERSION,
    VERSION_HEADER,
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    JSONRPCResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    to_wire,
)
from coordinator.errors import ProtocolError, RemoteA2AError, TransportError, translated

ResultT = TypeVar("ResultT", bound=BaseModel)


@dataclass(frozen=True)
class ClientLimits:
    """How long and how much the client is willing to wait for and read."""

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_response_bytes: int = 1_000_000


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
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._ids = itertools.count(1)

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

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
            card = AgentCard.model_validate(document)
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

    # --- plumbing -------------------------------------------------------------------------

    async def _call(
        self,
        endpoint: str,
        method: str,
        params: BaseModel,
        result_type: type[ResultT],
        headers: Mapping[str, str] | None,
    ) -> ResultT:
        request_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": to_wire(params)}
        with translated(f"{method} to", endpoint):
            status, _, body = await self._post(endpoint, strict_json.dumps(payload), headers)
            document = strict_json.loads(body) if body else None
            if not isinstance(document, dict):
                raise ProtocolError(
                    f"{method} to {endpoint}: HTTP {status} without a JSON-RPC body",
                    "not_jsonrpc",
                )
            response = JSONRPCResponse.model_validate(document)
            if response.error is not None:
                error = response.error
                raise RemoteA2AError(error.code, error.message, reason_of(error.data))
            if response.id != request_id:
                raise ProtocolError(f"{method} to {endpoint}: response id mismatch", "id_mismatch")
            return result_type.model_validate(response.result)

    async def _get(self, url: str) -> tuple[int, httpx.Headers, bytes]:
        return await self._exchange("GET", url, None, {})

    async def _post(
        self, url: str, body: bytes, headers: Mapping[str, str] | None
    ) -> tuple[int, httpx.Headers, bytes]:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        return await self._exchange("POST", url, body, all_headers)

    async def _exchange(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]
    ) -> tuple[int, httpx.Headers, bytes]:
        sent = {
            VERSION_HEADER: PROTOCOL_VERSION,
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            **headers,
        }
        try:
            async with asyncio.timeout(self.limits.total_timeout):
                request = self._http.build_request(method, url, content=body, headers=sent)
                response = await self._http.send(request, stream=True)
                try:
                    return response.status_code, response.headers, await self._read(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise TransportError(f"{method} {url}: total deadline passed", "timeout") from None

    async def _read(self, response: httpx.Response) -> bytes:
        """Read the raw body, refusing encodings we did not ask for and oversized bodies."""
        encoding = response.headers.get("content-encoding", "identity").lower()
        if encoding not in ("identity", ""):
            raise ProtocolError(f"response uses content-encoding {encoding!r}", "encoding_refused")
        cap = self.limits.max_response_bytes
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise ProtocolError(f"response of {declared} bytes exceeds {cap}", "response_too_large")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > cap:
                raise ProtocolError(f"response exceeds {cap} bytes", "response_too_large")
            chunks.append(chunk)
        return b"".join(chunks)
