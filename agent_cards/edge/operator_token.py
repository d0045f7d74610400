"""A route of an operator, not of an A2A caller: guarded by a bearer token of its own.

:class:`OperatorToken` holds the SHA-256 of the configured token (never the token) and
answers, for a request, the refusal to send or None: 404 when no token is configured
(nothing is exposed), 401 with a ``WWW-Authenticate`` challenge when none or another is
presented. The comparison is in constant time over both sides' hashes; the token is
never repeated in an answer.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse


class OperatorToken:
    def __init__(self, token: str | None, realm: str, disabled_reason: str) -> None:
        self._expected = hashlib.sha256(token.encode()).digest() if token else None
        self._realm = realm
        self._disabled = disabled_reason

    def refusal(self, request: Request) -> JSONResponse | None:
        """The answer refusing ``request``, or None when it holds the token."""
        if self._expected is None:
            return self._refused(404, self._disabled, "no operator token is configured")
        values = request.headers.getlist("authorization")
        scheme, _, presented = (values[0] if len(values) == 1 else "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return self._refused(401, "token_missing", "an operator bearer token is required")
        if not hmac.compare_digest(hashlib.sha256(presented.encode()).digest(), self._expected):
            return self._refused(401, "token_invalid", "the operator token is not valid")
        return None

    def _refused(self, status: int, reason: str, message: str) -> JSONResponse:
        headers = {"Cache-Control": "no-store"}
        if status == 401:
            headers["WWW-Authenticate"] = f'Bearer realm="{self._realm}"'
        return JSONResponse({"error": {"reason": reason, "message": message}}, status, headers)
