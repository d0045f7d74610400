"""A member behind the bounded HTTP edge: the token first, then the body, then the app.

A ``POST`` to the JSON-RPC endpoint goes through, in this order:

1. the connection limits of :mod:`agent_cards.edge.protocol` (header bytes and time, body time,
   connections per client and in total), set when :func:`member_kit.server.app.serve`
   starts uvicorn;
2. :class:`TokenFirst` (for every A2A route of every binding, each :class:`Guard`
   answering in its binding's error form): the delegation token is authenticated from the
   headers alone
   (:meth:`~member_kit.server.authorization.hook.DelegationAuthorizer.authenticate`:
   signature, times, audience, claims); a refusal is answered before one byte of the body
   is read, so an unauthenticated caller never reaches a parser. Its JSON-RPC error has
   ``id: null``, since the request's id was deliberately not read (JSON-RPC 2.0 section 5);
3. :class:`agent_cards.edge.body.BodyGuard`: at most ``max_body_bytes`` streamed in (413), and a
   JSON body in UTF-8 within the depth and number range (-32700 / -32600);
4. :class:`FastSend`: a blocking ``SendMessage`` goes straight to the JSON-RPC endpoint
   (the fast path), anything else through the routing (the general path);
5. the JSON-RPC endpoint, which parses the body and holds the already authenticated token
   against what the request asks (skill, handoff, tenant, continuation).

The limits are :class:`agent_cards.edge.limits.EdgeLimits`, read from the member's own
variables by :func:`member_limits` (``REMOTE_RISK_*`` for remote_risk, ``LEGAL_TERMS_*``
for the legal team's member: :mod:`member_kit.telemetry.names`; see the README's
"Limits").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.exception_handlers import http_exception_handler
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_cards.edge.body import BODY_TOO_LARGE, READ_DOCUMENT, BodyGuard
from agent_cards.edge.limits import EdgeLimits
from contracts import strict_json
from contracts.strict_json import StrictJSONError
from member_kit import errors
from member_kit.server.authorization.asked import SEND_MESSAGE
from member_kit.server.authorization.hook import AUTHENTICATED_STATE
from member_kit.server.jsonrpc import JSONRPCEndpoint, check_content_type
from member_kit.telemetry.names import REMOTE_RISK, TelemetryNames
from member_kit.trust.verifier import Authenticated

JSON_MEDIA_TYPE = "application/json"
# Bodies that are not UTF-8 JSON text are parse errors; the rest is valid JSON we refuse.
PARSE_ERROR_REASONS = frozenset({"json_not_utf8", "json_lone_surrogate"})

Authenticate = Callable[[Request], Awaitable[Authenticated]]


def member_limits(
    environ: Mapping[str, str], *, max_body_bytes: int, names: TelemetryNames = REMOTE_RISK
) -> EdgeLimits:
    """The limits of the member ``names`` name: the defaults, ``max_body_bytes`` from its
    settings, then every limit variable under its prefix (``REMOTE_RISK_*`` for
    remote_risk) on top."""
    base = EdgeLimits(max_body_bytes=max_body_bytes)
    return EdgeLimits.from_env(names.env_prefix, environ, base)


def jsonrpc_error(error: errors.A2AError, status: int = 200) -> Response:
    """A JSON-RPC error answer to a request whose id was not read."""
    body = {"jsonrpc": "2.0", "id": None, "error": error.error_object()}
    headers = {**getattr(error, "headers", {}), "Connection": "close"}
    return Response(strict_json.dumps(body), status, headers, media_type=JSON_MEDIA_TYPE)


def body_refusal(status: int, reason: str, message: str) -> ASGIApp:
    """How :class:`~agent_cards.edge.body.BodyGuard` refusals look here: typed JSON-RPC errors."""
    metadata = {"reason": reason}
    if reason == BODY_TOO_LARGE:
        return jsonrpc_error(errors.InvalidRequest(message, metadata=metadata), 413)
    if reason in PARSE_ERROR_REASONS:
        return jsonrpc_error(errors.ParseError(message, metadata=metadata))
    return jsonrpc_error(errors.InvalidRequest(message, metadata=metadata))


# Which requests a guard covers (by HTTP method and path) and how it answers a refusal.
Covers = Callable[[str, str], bool]
Refuse = Callable[[errors.DelegationRefused], Response]


def jsonrpc_refusal(refused: errors.DelegationRefused) -> Response:
    return jsonrpc_error(refused, refused.http_status)


@dataclass(frozen=True)
class Guard:
    """Token-first for the requests ``covers`` names; ``refuse`` renders a refusal in the
    binding's own error form."""

    covers: Covers
    refuse: Refuse = jsonrpc_refusal


def posts_to(paths: frozenset[str]) -> Covers:
    return lambda method, path: method == "POST" and path in paths


class TokenFirst:
    """Authenticate the delegation token of a request a guard covers before its body is
    read."""

    def __init__(
        self, app: ASGIApp, *, guards: tuple[Guard, ...], authenticate: Authenticate
    ) -> None:
        self.app = app
        self._guards = guards
        self._authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guard = self._guard(scope)
        if guard is not None:
            try:
                authenticated = await self._authenticate(Request(scope))
            except errors.DelegationRefused as refused:
                await guard.refuse(refused)(scope, receive, send)
                return
            scope.setdefault("state", {})[AUTHENTICATED_STATE] = authenticated
        await self.app(scope, receive, send)

    def _guard(self, scope: Scope) -> Guard | None:
        if scope["type"] != "http":
            return None
        return next((g for g in self._guards if g.covers(scope["method"], scope["path"])), None)


def install(
    app: Starlette,
    limits: EdgeLimits,
    *,
    guards: tuple[Guard, ...],
    authenticate: Authenticate | None,
) -> None:
    """Put ``app`` behind the body guard and, when tokens are checked, the token check
    (added last, so it runs first)."""
    app.add_middleware(BodyGuard, limits=limits, refuse=body_refusal)
    if authenticate is not None:
        app.add_middleware(TokenFirst, guards=guards, authenticate=authenticate)


# --- the blocking send's own path ---------------------------------------------------------
#
# The blocking SendMessage, once the checks above have run, skips the routing.
#
# :class:`FastSend` sits just inside the edge's checks (the observed HTTP layer, the
# token-first check and the body guard above have run: the
# token is authenticated, the body read within its limits and its JSON shape checked). For
# a ``POST`` to the JSON-RPC endpoint whose body is a blocking ``SendMessage`` (strict JSON,
# ``Content-Type: application/json``, no ``configuration.returnImmediately: true``) it
# answers with the endpoint itself (:meth:`~member_kit.server.jsonrpc.JSONRPCEndpoint.answer`,
# the body parsed once: by the edge, when its check read it), without the router and
# exception layers of the general stack.
# Everything else (other methods, a streaming or non-blocking send, a body the endpoint
# must refuse) goes to the general stack unchanged, its body handed on as it was read.
#
# Both paths run the very same checks, in the same order, with the same answers: the fast
# one only skips the routing. ``counts`` says which path each request took (``app.state``'s
# ``send_paths``: ``fast`` and ``general``).

FAST = "fast"
GENERAL = "general"


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
        document = _parsed(scope, body)
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


def _parsed(scope: Scope, body: bytes) -> Any:
    """The strict parse of ``body``: the document the edge's body check read from these
    very bytes, where it read one (orjson's, as the strict parser's own reading of that
    spelling; the bounds checked again at the parser's), else the parser's."""
    read = scope.get("state", {}).get(READ_DOCUMENT)
    if read is None or read[0] is not body:
        return strict_json.loads(body)
    strict_json.check_bounds(body.decode("utf-8"))
    return read[1]


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
