"""The operator token, held as a digest and compared in constant time.

Both the API's bearer check (:class:`~coordinator.service.api.OperatorAuth`) and the
console's login form (:mod:`coordinator.console`) ask this one object whether what they
were given is the token: both sides are hashed first, so not even the length leaks, and
the token itself is never kept where a repr or a log line could show it.
"""

from __future__ import annotations

import hashlib
import hmac


class OperatorToken:
    def __init__(self, token: str) -> None:
        self._expected = hashlib.sha256(token.encode()).digest()

    def __repr__(self) -> str:
        return "OperatorToken([redacted])"

    def matches(self, presented: bytes) -> bool:
        return hmac.compare_digest(hashlib.sha256(presented).digest(), self._expected)
