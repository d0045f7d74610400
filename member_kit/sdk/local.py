"""An a2a-sdk request handler as the agent the guard's handler forwards to, in-process.

Each call the guard would make over JSON-RPC (``SendMessage``, ``GetTask``,
``CancelTask``) is parsed into the SDK's request message, handed to the SDK's
``RequestHandler`` with a call context of its own, and its answer read back as our wire
model, as the SDK's own JSON-RPC app would encode it. An A2A error the SDK raises passes
on as the guard passes on the upstream's (:func:`~member_kit.guard.upstream.passed_on`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError, TaskNotFoundError
from google.protobuf import json_format
from google.protobuf.message import Message

from contracts.wire import JSONObject
from member_kit import errors
from member_kit.guard.upstream import Model, passed_on, result_of

_REQUESTS: dict[str, type[Message]] = {
    "SendMessage": a2a_pb2.SendMessageRequest,
    "GetTask": a2a_pb2.GetTaskRequest,
    "CancelTask": a2a_pb2.CancelTaskRequest,
}


class LocalAgent:
    """Calls ``handler`` (the SDK's ``DefaultRequestHandler``, or any ``RequestHandler``)."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler
        self._methods: dict[str, Callable[[Any, ServerCallContext], Awaitable[Any]]] = {
            "SendMessage": self._send,
            "GetTask": handler.on_get_task,
            "CancelTask": handler.on_cancel_task,
        }

    async def call(self, method: str, params: JSONObject, result_type: type[Model]) -> Model:
        """The handler's answer to ``method`` as ``result_type``; an A2A error as ours."""
        try:
            request = json_format.ParseDict(params, _REQUESTS[method](), ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise errors.InvalidParams(f"params: {exc}") from None
        context = ServerCallContext(state={"method": method})
        try:
            answer = await self._methods[method](request, context)
        except A2AError as error:
            code = JSON_RPC_ERROR_CODE_MAP.get(type(error))
            raise passed_on({"code": code, "message": error.message}) from None
        if answer is None:  # as the SDK's own JSON-RPC app answers a missing task
            raise passed_on({"code": JSON_RPC_ERROR_CODE_MAP[TaskNotFoundError], "message": ""})
        return result_of(method, json_format.MessageToDict(answer), result_type)

    async def _send(self, request: Any, context: ServerCallContext) -> Message:
        answer = await self.handler.on_message_send(request, context)
        if isinstance(answer, a2a_pb2.Task):
            return a2a_pb2.SendMessageResponse(task=answer)
        return a2a_pb2.SendMessageResponse(message=answer)

    async def aclose(self) -> None:
        """Nothing to close: the handler is the agent's."""
