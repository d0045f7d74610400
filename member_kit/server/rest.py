"""A2A's HTTP+JSON binding, the routes ``a2a.proto``'s ``google.api.http`` annotations give.

Under the interface URL (``/a2a/rest``), each with a ``/{tenant}`` variant:
``POST /message:send``, ``POST /message:stream`` (SSE), ``GET /tasks/{id}``,
``GET /tasks``, ``POST /tasks/{id}:cancel``, ``GET /tasks/{id}:subscribe`` (SSE; POST is
accepted too, as the TCK sends it), the push config routes under
``/tasks/{taskId}/pushNotificationConfigs``, and ``GET /extendedAgentCard``.

A request becomes the same ``(method, params)`` a JSON-RPC call carries: the body
(``body: "*"``) or the query string (camelCase, typed by the operation's params), plus
the path's variables. It then goes through the same
:class:`~member_kit.server.jsonrpc.Dispatcher` as JSON-RPC, so the delegation token and
every trust check apply identically. Bodies are ``application/a2a+json`` (the spec's
media type; ``application/json`` is read too); errors are ``google.rpc.Status`` JSON
with ``ErrorInfo`` details and the error's HTTP status (a refused token keeps its 401,
403 or 503 and its challenge). A stream's SSE ``data:`` lines each hold one
``StreamResponse``; an error after the stream started is one last line holding the
error body.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agent_cards.bindings.status import status_json
from contracts import strict_json
from contracts.strict_json import StrictJSONError
from contracts.wire import VERSION_HEADER, JSONObject, to_wire
from member_kit import errors
from member_kit.server.jsonrpc import SSE_MEDIA_TYPE, Dispatcher, check_version
from member_kit.server.streams import KEEP_ALIVE, kept_alive

logger = logging.getLogger(__name__)

BINDING = "http_json"
MEDIA_TYPE = "application/a2a+json"
_READABLE = frozenset({MEDIA_TYPE, "application/json"})
_ID = r"(?P<{}>[^/:]+)"


@dataclass(frozen=True)
class RestRoute:
    verbs: frozenset[str]
    pattern: re.Pattern[str]
    method: str
    has_body: bool


def _route(verbs: str, template: str, method: str) -> RestRoute:
    path = template.format(id=_ID.format("id"), task_id=_ID.format("taskId"))
    pattern = re.compile(r"(?:(?P<tenant>[^/]+)/)?" + path)
    return RestRoute(frozenset(verbs.split()), pattern, method, "POST" in verbs)


CONFIGS = "tasks/{task_id}/pushNotificationConfigs"
ROUTES = (
    _route("POST", "message:send", "SendMessage"),
    _route("POST", "message:stream", "SendStreamingMessage"),
    _route("GET POST", "tasks/{id}:subscribe", "SubscribeToTask"),
    _route("POST", "tasks/{id}:cancel", "CancelTask"),
    _route("GET", "tasks/{id}", "GetTask"),
    _route("GET", "tasks", "ListTasks"),
    _route("POST", CONFIGS, "CreateTaskPushNotificationConfig"),
    _route("GET", CONFIGS, "ListTaskPushNotificationConfigs"),
    _route("GET", CONFIGS + "/{id}", "GetTaskPushNotificationConfig"),
    _route("DELETE", CONFIGS + "/{id}", "DeleteTaskPushNotificationConfig"),
    _route("GET", "extendedAgentCard", "GetExtendedAgentCard"),
)


def match(verb: str, path: str) -> tuple[RestRoute, dict[str, str]]:
    """The route for ``verb`` on ``path`` (relative to the interface URL) and its
    variables; an unknown path is MethodNotFound (404), a known one with another verb
    UnsupportedOperation."""
    known = False
    for route in ROUTES:
        found = route.pattern.fullmatch(path)
        if found is None:
            continue
        known = True
        if verb in route.verbs:
            return route, {k: v for k, v in found.groupdict().items() if v is not None}
    if known:
        raise errors.UnsupportedOperation(f"{verb} is not served on /{path}")
    raise errors.MethodNotFound(f"no A2A operation at /{path}")


class RESTEndpoint:
    """Route ``endpoint.handle`` at ``{interface path}/{path:path}`` for GET, POST, DELETE."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._note = dispatcher.telemetry.note  # the facts of its app's request

    async def handle(self, request: Request) -> Response:
        try:
            check_version(request.headers.get(VERSION_HEADER))  # as on JSON-RPC: first
            route, variables = match(request.method, request.path_params["path"])
            self._note(a2a_method=route.method)
            params = await self._params(request, route, variables)
            result = await self._dispatcher.call(request, route.method, params, BINDING)
            if not isinstance(result, BaseModel):
                return _event_stream(result)
            body = result.model_dump_json(by_alias=True, exclude_none=True)
            return Response(body, media_type=MEDIA_TYPE)
        except errors.A2AError as error:
            self._note(a2a_error=error.kind.reason)
            logger.info("HTTP+JSON %s answered %s: %s", request.url.path, error.kind, error.message)
            return error_response(error)
        except Exception:
            logger.exception("HTTP+JSON request %s failed unexpectedly", request.url.path)
            return error_response(errors.InternalError("internal error"))

    async def _params(
        self, request: Request, route: RestRoute, variables: dict[str, str]
    ) -> JSONObject:
        params: JSONObject = await _body(request) if route.has_body else {}
        if not route.has_body:
            params = query_params(self._dispatcher, route.method, request)
        params.update(variables)
        return params


async def _body(request: Request) -> JSONObject:
    media_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    raw = await request.body()
    if not raw.strip():  # e.g. a cancel or subscribe with no body: no params beyond the path
        return {}
    if media_type not in _READABLE:
        raise errors.ContentTypeNotSupported(
            f"Content-Type {media_type or 'none'} is not supported; send {MEDIA_TYPE}"
        )
    try:
        document = strict_json.loads(raw)
    except StrictJSONError as exc:
        raise errors.ParseError(f"the request body is not strict JSON: {exc}") from None
    if not isinstance(document, dict):
        raise errors.InvalidRequest("the request body must be a JSON object")
    return document


def query_params(dispatcher: Dispatcher, method: str, request: Request) -> JSONObject:
    """The query string as params: each value typed as the operation's field says."""
    types = dispatcher.field_types(method)
    params: JSONObject = {}
    for key, value in request.query_params.items():
        params[key] = _typed(key, value, types.get(key))
    return params


def _typed(key: str, value: str, kind: type | None) -> Any:
    if kind is bool:
        if value not in ("true", "false"):
            raise errors.InvalidParams(f"{key}: expected true or false")
        return value == "true"
    if kind is int:
        try:
            return int(value)
        except ValueError:
            raise errors.InvalidParams(f"{key}: expected an integer") from None
    return value


def covers(base_path: str) -> Callable[[str, str], bool]:
    """Every request under the interface path: each is an A2A call needing a token."""
    prefix = base_path + "/"
    return lambda method, path: path.startswith(prefix)


def refusal(refused: errors.DelegationRefused) -> Response:
    return error_response(refused)


def error_response(error: errors.A2AError) -> Response:
    """The ``google.rpc.Status`` body of ``error`` with its HTTP status."""
    status = error.status_over_http
    body = status_json(error.kind, error.message, error.metadata, status)
    return Response(
        strict_json.dumps(body), status, headers=dict(error.headers), media_type=MEDIA_TYPE
    )


def _event_stream(events: AsyncIterator[BaseModel]) -> StreamingResponse:
    return StreamingResponse(
        _sse_lines(events),
        media_type=SSE_MEDIA_TYPE,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse_lines(events: AsyncIterator[BaseModel]) -> AsyncIterator[bytes]:
    stream = kept_alive(events)
    try:
        async for event in stream:
            if event is None:
                yield KEEP_ALIVE
                continue
            yield b"data: " + strict_json.dumps(to_wire(event)) + b"\n\n"
    except errors.A2AError as error:
        logger.info("HTTP+JSON stream ended with %s: %s", error.kind.reason, error.message)
        body = status_json(error.kind, error.message, error.metadata, error.status_over_http)
        yield b"data: " + strict_json.dumps(body) + b"\n\n"
    except Exception:
        logger.exception("HTTP+JSON stream failed unexpectedly")
        body = status_json(errors.InternalError("internal error").kind, "internal error")
        yield b"data: " + strict_json.dumps(body) + b"\n\n"
    finally:
        await stream.aclose()  # and the events with it
