"""The HTTP+JSON binding of A2A v1.0, as ``a2a.proto``'s ``google.api.http`` rules define it.

=====================  ======  ==========================================
operation              method  path (``/{tenant}`` first when the card names one)
=====================  ======  ==========================================
SendMessage            POST    ``/message:send``     (body: the request)
SendStreamingMessage   POST    ``/message:stream``   (SSE of StreamResponse)
GetTask                GET     ``/tasks/{id}``       (``?historyLength=``)
CancelTask             POST    ``/tasks/{id}:cancel`` (body: the request)
SubscribeToTask        GET     ``/tasks/{id}:subscribe`` (SSE)
GetExtendedAgentCard   GET     ``/extendedAgentCard``
=====================  ======  ==========================================

Bodies are ``application/a2a+json`` (ProtoJSON); fields bound to the path are not repeated
in the body. An error is a ``google.rpc.Status`` body whose ``ErrorInfo`` names the A2A
error (:mod:`coordinator.remote.wire.wire_errors`). Every request goes through the client's
bounded exchange (deadline, byte cap, no redirects, ``A2A-Version``, trace context), every
stream through its bounded SSE reader.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from pydantic import BaseModel

from contracts import strict_json
from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    to_wire,
)
from coordinator.errors import ProtocolError, translated
from coordinator.remote.wire import traced
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.transport import HTTP_JSON, Interface
from coordinator.remote.wire.wire_errors import from_http_status_body

MEDIA_TYPE = "application/a2a+json"
ACCEPT = f"{MEDIA_TYPE}, application/json"
ResultT = TypeVar("ResultT", bound=BaseModel)


def _segment(value: str) -> str:
    return quote(value, safe="")


class HttpJsonTransport:
    """One HTTP+JSON interface of one agent."""

    def __init__(self, client: A2AClient, interface: Interface) -> None:
        self.client = client
        self.interface = interface
        base = interface.url.rstrip("/")
        self._base = f"{base}/{_segment(interface.tenant)}" if interface.tenant else base

    @property
    def endpoint(self) -> str:
        return self.interface.url

    def _body(self, request: BaseModel, *bound: str) -> bytes:
        """The request as ProtoJSON without the fields the path carries."""
        document = {k: v for k, v in to_wire(request).items() if k not in ("tenant", *bound)}
        return strict_json.dumps(document)

    async def send_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse:
        url = f"{self._base}/message:send"
        body = self._body(request)
        return await self._call("SendMessage", "POST", url, body, SendMessageResponse, headers)

    async def get_task(
        self, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        query = {} if request.history_length is None else {"historyLength": request.history_length}
        url = f"{self._base}/tasks/{_segment(request.id)}"
        url += f"?{urlencode(query)}" if query else ""
        return await self._call("GetTask", "GET", url, None, Task, headers)

    async def cancel_task(
        self, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        url = f"{self._base}/tasks/{_segment(request.id)}:cancel"
        body = self._body(request, "id")
        return await self._call("CancelTask", "POST", url, body, Task, headers)

    def stream_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]:
        url = f"{self._base}/message:stream"
        return self._stream("SendStreamingMessage", "POST", url, self._body(request), headers)

    def subscribe(
        self, task_id: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamResponse]:
        url = f"{self._base}/tasks/{_segment(task_id)}:subscribe"
        return self._stream("SubscribeToTask", "GET", url, None, headers)

    async def extended_card(self, headers: Mapping[str, str]) -> dict[str, Any]:
        url = f"{self._base}/extendedAgentCard"
        document = await self._document("GetExtendedAgentCard", "GET", url, None, headers)
        if not isinstance(document, dict):
            raise ProtocolError(f"extended card from {url} is not a JSON object", "not_json")
        return document

    # --- plumbing ---------------------------------------------------------------------------

    def _headers(self, body: bytes | None, headers: Mapping[str, str] | None) -> dict[str, str]:
        sent = {"Accept": ACCEPT, **(headers or {})}
        if body is not None:
            sent["Content-Type"] = MEDIA_TYPE
        return sent

    async def _document(
        self,
        rpc: str,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> Any:
        with translated(f"{rpc} to", url), traced.remote_call(rpc, url, HTTP_JSON):
            status, _, raw = await self.client.exchange(
                method, url, body, self._headers(body, headers)
            )
            document = strict_json.loads(raw) if raw else None
            if status != 200:
                raise from_http_status_body(status, document, f"{rpc} to {url}")
            return document

    async def _call(
        self,
        rpc: str,
        method: str,
        url: str,
        body: bytes | None,
        result_type: type[ResultT],
        headers: Mapping[str, str] | None,
    ) -> ResultT:
        document = await self._document(rpc, method, url, body, headers)
        with translated(f"{rpc} to", url):
            return result_type.model_validate(document)

    async def _stream(
        self,
        rpc: str,
        method: str,
        url: str,
        body: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> AsyncGenerator[StreamResponse, None]:
        sent = self._headers(body, headers)
        sent["Accept"] = f"text/event-stream, {ACCEPT}"
        events = self.client.stream_events(rpc, method, url, body, sent, HTTP_JSON)
        try:
            async for data in events:
                with translated(f"{rpc} to", url):
                    document = strict_json.loads(data)
                    if isinstance(document, dict) and "error" in document:
                        raise from_http_status_body(0, document, f"{rpc} to {url}")
                    yield StreamResponse.model_validate(document)
        finally:
            await events.aclose()
