"""An A2A v0.3 agent over JSON-RPC: ``message/send``, ``tasks/get``, ``tasks/cancel``,
``message/stream``, ``tasks/resubscribe`` and ``agent/getAuthenticatedExtendedCard``.

Every call goes through the same client as v1.0 (deadline, byte cap, no redirects, token,
trace context), names ``A2A-Version: 0.3``, and has its params and result translated by
:mod:`coordinator.remote.wire.v03.shapes`. A v0.3 error (``code``, ``message``, free-form
``data``) is a :class:`~coordinator.errors.RemoteA2AError` by its code, as in v1.0.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from contracts import strict_json
from contracts.wire import (
    VERSION_HEADER,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from coordinator.errors import ProtocolError, translated
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.jsonrpc import jsonrpc_result
from coordinator.remote.wire.transport import Interface
from coordinator.remote.wire.v03 import shapes

PROTOCOL_VERSION_03 = "0.3"
_ids = itertools.count(1)


class V03Transport:
    """One v0.3 JSON-RPC interface of one agent."""

    def __init__(self, client: A2AClient, interface: Interface) -> None:
        self.client = client
        self.interface = interface

    @property
    def endpoint(self) -> str:
        return self.interface.url

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        return {**(headers or {}), VERSION_HEADER: PROTOCOL_VERSION_03}

    async def _call(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str] | None
    ) -> Any:
        return await self.client.call_raw(self.endpoint, method, params, self._headers(headers))

    async def send_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse:
        result = await self._call("message/send", shapes.send_params(request), headers)
        with translated("message/send to", self.endpoint):
            return shapes.send_result(result)

    async def get_task(
        self, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        params: dict[str, Any] = {"id": request.id}
        if request.history_length is not None:
            params["historyLength"] = request.history_length
        result = await self._call("tasks/get", params, headers)
        with translated("tasks/get to", self.endpoint):
            return shapes.task_in(result)

    async def cancel_task(
        self, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task:
        params: dict[str, Any] = {"id": request.id}
        if request.metadata is not None:
            params["metadata"] = request.metadata
        result = await self._call("tasks/cancel", params, headers)
        with translated("tasks/cancel to", self.endpoint):
            return shapes.task_in(result)

    def stream_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]:
        return self._stream("message/stream", shapes.send_params(request), headers)

    def subscribe(
        self, task_id: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamResponse]:
        return self._stream("tasks/resubscribe", {"id": task_id}, headers)

    async def extended_card(self, headers: Mapping[str, str]) -> dict[str, Any]:
        card = await self._call("agent/getAuthenticatedExtendedCard", {}, headers)
        if not isinstance(card, dict):
            raise ProtocolError(f"extended card from {self.endpoint} is not an object", "not_json")
        return card

    async def _stream(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str] | None
    ) -> AsyncGenerator[StreamResponse, None]:
        request_id = next(_ids)
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        sent = {"Content-Type": "application/json", **self._headers(headers)}
        body = strict_json.dumps(payload)
        events = self.client.stream_events(method, "POST", self.endpoint, body, sent)
        try:
            async for data in events:
                with translated(f"{method} to", self.endpoint):
                    document = strict_json.loads(data)
                    if not isinstance(document, dict):
                        raise ProtocolError(
                            f"{method}: an event is not a JSON object", "not_jsonrpc"
                        )
                    result = jsonrpc_result(document, request_id, method, self.endpoint)
                    yield shapes.stream_event(result)
        finally:
            await events.aclose()
