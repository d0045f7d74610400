"""A route of an operator, not of an A2A caller: guarded by a bearer token of its own.

:class:`OperatorToken` answers, for a request, the refusal to send or None: 404 when no
token is configured (nothing is exposed), 401 with a ``WWW-Authenticate`` challenge when
none or another is presented, 429 with ``Retry-After`` (``token_throttled``) for a wrong
token from an address, or of a fingerprint, that failed too often. What is right, wrong
or throttled is :meth:`~agent_cards.edge.operator_secret.OperatorSecret.judge` (the right
token always passes); the token is never repeated in an answer.

:func:`~agent_cards.edge.token_strength.check_strength` is the rule a configured token
is held to before the service starts.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from agent_cards.edge.operator_secret import OperatorSecret
from agent_cards.edge.throttle import (
    THROTTLED,
    THROTTLED_MESSAGE,
    FailureThrottle,
    retry_after_header,
)
from agent_cards.edge.token_strength import check_strength


class OperatorToken:
    def __init__(
        self,
        token: str | None,
        realm: str,
        disabled_reason: str,
        throttle: FailureThrottle | None = None,
    ) -> None:
        if token is not None:
            check_strength(token, f"the {realm} token")
        self._secret = OperatorSecret(token) if token else None
        self._realm = realm
        self._disabled = disabled_reason
        self._throttle = throttle or FailureThrottle()

    def refusal(self, request: Request) -> JSONResponse | None:
        """The answer refusing ``request``, or None when it holds the token."""
        if self._secret is None:
            return self._refused(404, self._disabled, "no operator token is configured")
        values = request.headers.getlist("authorization")
        scheme, _, presented = (values[0] if len(values) == 1 else "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return self._refused(401, "token_missing", "an operator bearer token is required")
        client = request.client.host if request.client is not None else ""
        judged = self._secret.judge(presented.encode(), client, self._throttle)
        if judged.retry_after is not None:
            wait = retry_after_header(judged.retry_after)
            return self._refused(429, THROTTLED, THROTTLED_MESSAGE, wait)
        if not judged.passed:
            return self._refused(401, "token_invalid", "the operator token is not valid")
        return None

    def _refused(
        self, status: int, reason: str, message: str, extra: dict[str, str] | None = None
    ) -> JSONResponse:
        headers = {"Cache-Control": "no-store", **(extra or {})}
        if status == 401:
            headers["WWW-Authenticate"] = f'Bearer realm="{self._realm}"'
        return JSONResponse({"error": {"reason": reason, "message": message}}, status, headers)
