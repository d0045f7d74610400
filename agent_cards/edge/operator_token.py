"""A route of an operator, not of an A2A caller: guarded by a bearer token of its own.

:class:`OperatorToken` holds the SHA-256 of the configured token (never the token) and
answers, for a request, the refusal to send or None: 404 when no token is configured
(nothing is exposed), 401 with a ``WWW-Authenticate`` challenge when none or another is
presented, 429 with ``Retry-After`` (``token_throttled``) once a client address has
presented a wrong token too often (:class:`~agent_cards.edge.throttle.FailureThrottle`).
The comparison is in constant time over both sides' hashes; the token is never repeated
in an answer.

:func:`~agent_cards.edge.token_strength.check_strength` is the rule a configured token
is held to before the service starts.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse

from agent_cards.edge.throttle import THROTTLED, FailureThrottle, retry_after_header
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
        self._expected = hashlib.sha256(token.encode()).digest() if token else None
        self._realm = realm
        self._disabled = disabled_reason
        self._throttle = throttle or FailureThrottle()

    def refusal(self, request: Request) -> JSONResponse | None:
        """The answer refusing ``request``, or None when it holds the token."""
        if self._expected is None:
            return self._refused(404, self._disabled, "no operator token is configured")
        client = request.client.host if request.client is not None else ""
        wait = self._throttle.retry_after(client)
        if wait is not None:
            message = "too many wrong tokens from here; try again later"
            return self._refused(429, THROTTLED, message, retry_after_header(wait))
        values = request.headers.getlist("authorization")
        scheme, _, presented = (values[0] if len(values) == 1 else "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return self._refused(401, "token_missing", "an operator bearer token is required")
        if not hmac.compare_digest(hashlib.sha256(presented.encode()).digest(), self._expected):
            self._throttle.failed(client)
            return self._refused(401, "token_invalid", "the operator token is not valid")
        self._throttle.succeeded(client)
        return None

    def _refused(
        self, status: int, reason: str, message: str, extra: dict[str, str] | None = None
    ) -> JSONResponse:
        headers = {"Cache-Control": "no-store", **(extra or {})}
        if status == 401:
            headers["WWW-Authenticate"] = f'Bearer realm="{self._realm}"'
        return JSONResponse({"error": {"reason": reason, "message": message}}, status, headers)
