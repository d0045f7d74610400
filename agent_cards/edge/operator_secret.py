"""An operator's secret, held as a digest, and the one judgment of what a client presents.

:class:`OperatorSecret` keeps the SHA-256 of the configured token (never the token) and
compares in constant time over both sides' digests, so not even the length leaks.
:meth:`OperatorSecret.judge` is the one rule every operator-guarded route of either
service calls (remote_risk's audit and metrics routes, the coordinator's API and the
console's login form):

1. the right token always passes, whatever was counted: no one sharing the operator's
   address (a co-located process, a NAT, a proxy) can lock the operator out by failing;
2. a wrong token is throttled (:class:`~agent_cards.edge.throttle.FailureThrottle`) once
   its client address, or its fingerprint from any address, has failed too often; else
   it is wrong, and counted under both.

The right token resets nothing, so the operator's own traffic does not buy a neighbour
more tries. A throttled address still learns whether a token is right: guessing is
stopped by the strength rule (:mod:`agent_cards.edge.token_strength`, about 128 bits).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from agent_cards.edge.throttle import FailureThrottle

FINGERPRINT_BYTES = 16


@dataclass(frozen=True)
class Judgement:
    """``passed``: the right token; else ``retry_after`` is set when it is throttled."""

    passed: bool
    retry_after: float | None = None


PASSED = Judgement(passed=True)
WRONG = Judgement(passed=False)


class OperatorSecret:
    def __init__(self, secret: str) -> None:
        self._expected = hashlib.sha256(secret.encode()).digest()

    def __repr__(self) -> str:
        return "OperatorSecret([redacted])"

    def judge(self, presented: bytes, client: str, throttle: FailureThrottle) -> Judgement:
        """Whether ``presented`` (from ``client``) passes, is wrong, or is throttled."""
        digest = hashlib.sha256(presented).digest()
        if hmac.compare_digest(digest, self._expected):
            return PASSED
        keys = (f"address {client}", f"token {digest[:FINGERPRINT_BYTES].hex()}")
        wait = throttle.retry_after(*keys)
        if wait is not None:
            return Judgement(passed=False, retry_after=wait)
        throttle.failed(*keys)
        return WRONG
