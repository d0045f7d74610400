"""The blocking SendMessage's own path through a member's HTTP edge.

:class:`FastSend` sits just inside the edge's checks (the observed HTTP layer, the
token-first check and the body guard of :mod:`member_kit.server.limits` have run: the
token is authenticated, the body read within its limits and its JSON shape checked). For
a ``POST`` to the JSON-RPC endpoint whose body is a blocking ``SendMessage`` (strict JSON,
``Content-Type: application/json``, no ``configuration.returnImmediately: true``) it
answers with the endpoint itself (:meth:`~member_kit.server.jsonrpc.JSONRPCEndpoint.answer`,
the body parsed once), without the router and exception layers of the general stack.
Everything else (other methods, a streaming or non-blocking send, a body the endpoint
must refuse) goes to the general stack unchanged, its body handed on as it was read.

Both paths run the very same checks, in the same order, with the same answers: the fast
one only skips the routing. ``counts`` says which path each request took (``app.state``'s
``send_paths``: ``fast`` and ``general``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts import strict_json
from contracts.strict_json import StrictJSONError
from member_kit import errors
from member_kit.server.jsonrpc import JSONRPCEndpoint, check_content_type

FAST = "fast"
GENERAL = "general"
SEND_MESSAGE = "SendMessage"


class FastSend:
    """ASGI middleware: blocking sends to ``routes`` (path -> its route) answered by
    ``endpoint`` directly, everything else by ``app``; each counted in ``counts``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        endpoint: JSONRPCEndpoint,
        routes: Mapping[str, BaseRoute],
        counts: Counter[str],
    ) -> None:
        self.app = app
        self._endpoint = endpoint
        self._routes = dict(routes)
        self._counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        first = await receive()  # the body guard gives the whole body as one message
        body = first.get("body", b"") if first["type"] == "http.request" else b""
        whole = first["type"] == "http.request" and not first.get("more_body", False)
        document = blocking_send(scope, body) if whole else None
        if document is None:
            self._counts[GENERAL] += 1
            await self.app(scope, _replay(first, receive), send)
            return
        self._counts[FAST] += 1
        scope["route"] = route  # what the access line and the metrics name it by
        request = Request(scope, _replay(first, receive))
        try:
            response = await self._endpoint.answer(request, (body, document))
        except HTTPException as exc:  # an authorize hook's own refusal, as routing answers it
            response = await http_exception_handler(request, exc)
        await response(scope, receive, send)


def blocking_send(scope: Scope, body: bytes) -> Any:
    """The strict parse of ``body`` when it is a blocking ``SendMessage`` sent as JSON,
    else None (the general path then reads it again, and answers it the same way)."""
    try:
        check_content_type(_content_type(scope))
        document = strict_json.loads(body)
    except (errors.A2AError, StrictJSONError):
        return None
    if not isinstance(document, dict) or document.get("method") != SEND_MESSAGE:
        return None
    params = document.get("params")
    configuration = params.get("configuration") if isinstance(params, dict) else None
    if (
        isinstance(configuration, dict)
        and configuration.get("returnImmediately", False) is not False
    ):
        return None
    return document


def _content_type(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bytes(value).decode("latin-1")
    return None


def _replay(first: Message, receive: Receive) -> Receive:
    """A ``receive`` giving the message already read first, then what follows."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if not given:
            given = True
            return first
        return await receive()

    return replayed
