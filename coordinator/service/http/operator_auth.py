"""The operator's bearer token, checked at the edge of the coordinator's API before any
body is read; the public paths pass without it."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.responses import JSONResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_cards.edge.operator_secret import OperatorSecret
from agent_cards.edge.throttle import (
    THROTTLED,
    THROTTLED_MESSAGE,
    FailureThrottle,
    retry_after_header,
)
from coordinator.service.http.api_errors import error_response
from coordinator.service.token_exchange import EXCHANGE_PATH
from coordinator.telemetry import http

PUBLIC_PATHS = frozenset(
    {"/healthz", "/livez", "/.well-known/jwks.json", "/openapi.json", "/docs"}
    # authenticated by what the holder presents (its token and a proof by its key)
    | {EXCHANGE_PATH}
)
REALM = "federation-coordinator"


class OperatorAuth:
    """Refuse every request outside :data:`PUBLIC_PATHS` without the operator's token.

    What is right, wrong or throttled is
    :meth:`~agent_cards.edge.operator_secret.OperatorSecret.judge`, the one rule of both
    services: the right token always passes; a wrong one from an address, or of a
    fingerprint, that failed too often is refused 429 (``token_throttled``). No answer
    repeats the token. Paths under ``exempt_prefixes`` belong to an
    :class:`~coordinator.service.http.api.AppExtension` that checks them itself.
    """

    def __init__(
        self, app: ASGIApp, token: OperatorSecret, exempt_prefixes: Sequence[str] = ()
    ) -> None:
        self.app = app
        self._token = token
        self._exempt = tuple(exempt_prefixes)
        self._failures = FailureThrottle()

    def exempt(self, path: str) -> bool:
        if path in PUBLIC_PATHS:
            return True
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self._exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope["path"]) or not routed(scope):
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else ""
        values = [v for k, v in scope["headers"] if k == b"authorization"]
        refusal = self.refusal(values, client)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await refusal(scope, receive, send)

    def refusal(self, values: list[bytes], client: str = "") -> JSONResponse | None:
        if not values:
            return self._unauthorized("token_missing", "an operator bearer token is required")
        if len(values) > 1:
            return self._unauthorized("token_malformed", "send one Authorization header")
        scheme, _, presented = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not presented or b" " in presented:
            return self._unauthorized("token_malformed", "expected Authorization: Bearer TOKEN")
        judged = self._token.judge(presented, client, self._failures)
        if judged.retry_after is not None:
            http.note(denial_reason=THROTTLED)
            wait = retry_after_header(judged.retry_after)
            return error_response(429, THROTTLED, THROTTLED_MESSAGE, wait)
        if not judged.passed:
            return self._unauthorized("token_invalid", "the operator token is not valid")
        return None

    @staticmethod
    def _unauthorized(reason: str, message: str) -> JSONResponse:
        http.note(denial_reason=reason)
        challenge = f'Bearer realm="{REALM}"'
        if reason != "token_missing":
            challenge += ', error="invalid_token"'
        headers = {"WWW-Authenticate": challenge, "Cache-Control": "no-store"}
        return error_response(401, reason, message, headers)


def routed(scope: Scope) -> bool:
    """Whether the path is one the app serves, by any method. A path it does not serve is
    answered 404 ``not_found`` to anyone, token or not (a 401 there read as an auth
    problem); a path it serves needs the token before anything else, so an
    unauthenticated caller learns only which paths exist, which the public
    ``/openapi.json`` lists already, never whether a run or an agent does."""
    router = getattr(scope.get("app"), "router", None)
    if router is None:
        return True  # cannot tell: guarded
    return any(route.matches(scope)[0] is not Match.NONE for route in router.routes)
