"""An ASGI middleware that reads a request body under the edge's limits, then hands it on.

:class:`BodyGuard` runs before the app sees a request with a body:

1. a declared ``Content-Length`` above ``max_body_bytes`` is refused at once (413), and so
   is a body that grows past it while streaming in (chunked or not, whatever its content
   type and whether or not it is valid JSON): nothing past the limit is kept in memory;
2. a JSON body (``application/json`` or ``+json``) is checked by
   :func:`agent_cards.edge.json_shape.check_json_shape` (one spelling, depth, number range);
3. the app then receives the body, already read, as one ``http.request`` message; a JSON
   document the check read on its way (a short body in orjson's own spelling) is left in
   the request's state under :data:`READ_DOCUMENT`, as ``(body, document)``, so that the
   app need not read the same bytes again.

How a refusal looks is the service's business: ``refuse(status, reason, message)``
returns the ASGI app that answers it (a JSON-RPC error for remote_risk, the API's error
document for the coordinator). Every refusal asks to close the connection, since the
rest of the body may still be on its way. A client that goes away while its body is read
is simply dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_cards.edge.errors import JSONShapeError
from agent_cards.edge.json_shape import UNREAD, check_json_shape
from agent_cards.edge.limits import EdgeLimits

Refuse = Callable[[int, str, str], ASGIApp]
BODY_TOO_LARGE = "body_too_large"
READ_DOCUMENT = "agent_cards.edge.read_document"


class BodyGuard:
    def __init__(self, app: ASGIApp, *, limits: EdgeLimits, refuse: Refuse) -> None:
        self.app = app
        self._limits = limits
        self._refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        limit = self._limits.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and _is_json(_header(scope, b"content-type")):
            try:
                document = check_json_shape(body, max_depth=self._limits.max_json_depth)
            except JSONShapeError as refused:
                await self._refuse(422, refused.reason, refused.message)(scope, receive, send)
                return
            if document is not UNREAD:
                scope.setdefault("state", {})[READ_DOCUMENT] = (body, document)
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body exceeds {self._limits.max_body_bytes} bytes"
        await self._refuse(413, BODY_TOO_LARGE, message)(scope, receive, send)


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1").strip()
    return None


def _is_json(content_type: str | None) -> bool:
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body once, then passes on what the server sends."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
