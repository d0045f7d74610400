"""When a failed send or read of a handoff is tried again, and after how long: pure rules.

One policy for every path (the CLI, the API with ``wait: true``, the workers, recovery):

* **What is retried.** Failures that say nothing about the work itself: the remote could
  not be reached or timed out (:class:`~coordinator.errors.TransportError` ``unreachable``,
  ``timeout``, ``transport_error``), an HTTP 5xx, 408 or 429, a body that is not JSON or
  not JSON-RPC at all (``not_json``, ``not_jsonrpc``: a proxy's error page), a JSON-RPC
  ``InternalError`` (-32603, e.g. the remote is at capacity) or a delegation check that
  could not be made (-32092, HTTP 503, e.g. the remote's replay record unavailable).
  Everything else (a refusal of the token, bad params, a task not found, a well-formed
  answer that breaks A2A) is final: sending it again would be refused again. See
  :func:`cause_of`.
* **How long to wait.** Exponential backoff from ``first_backoff`` by ``multiplier``,
  capped at ``max_backoff``, with a random part (``jitter``, the fraction of each wait
  that is drawn uniformly, so that many handoffs failing together do not retry
  together). A ``Retry-After`` the remote sent (delta-seconds or an HTTP date, RFC 9110
  section 10.2.3) is honoured: the wait is at least that long.
* **Until when.** Never past the handoff's lease: an attempt is only made if, after the
  wait, at least ``margin`` seconds of the lease are left; and at most ``max_attempts``
  attempts in all. A remote that cannot be reached at all (``unreachable``: nothing
  listens, no route) is tried for at most :data:`UNREACHABLE_RETRY_SECONDS` from the
  handoff's first failure, then the handoff ends FAILED ``dispatch_failed:unreachable``
  (the CLI's exit 3), whatever is left of its lease. Each retry is a new attempt of the
  same handoff under the same idempotency key, so a remote that did receive an earlier
  send answers the task it has.
* **A key the remote does not know yet.** A send refused ``kid_unknown`` (our keys
  rotated and the remote has not fetched them since, e.g. because a stranger spent its
  refresh) is tried once more, after the ``Retry-After`` the remote gave (by when it will
  have fetched our keys again) if that is at most :data:`MAX_KID_UNKNOWN_WAIT_SECONDS`;
  a second ``kid_unknown`` of the same handoff is final (:func:`kid_unknown_delay`).

:func:`next_delay` is the whole decision; :func:`attempt_event` is what the ledger
records for every attempt (its number, its cause, whether and when it is retried).
Nothing here sleeps, sends or reads a clock of its own: callers pass the time left and
the random source, so the rules are tested exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from coordinator.errors import FederationError, ProtocolError, RemoteA2AError, TransportError

RETRYABLE_TRANSPORT = frozenset({"unreachable", "timeout", "transport_error", "http_status"})
RETRYABLE_PROTOCOL = frozenset({"not_json", "not_jsonrpc"})
RETRYABLE_HTTP = frozenset({408, 429})
RETRYABLE_JSONRPC = frozenset({-32603, -32092})  # InternalError, DelegationUnavailable
KID_UNKNOWN = "kid_unknown"
UNREACHABLE = "unreachable"
# Send failures that mean the remote is unavailable (the CLI's exit 3), not that it refused.
UNAVAILABLE = frozenset({UNREACHABLE, "timeout", "transport_error"})
# The longest wait for a remote to fetch our keys again that is worth it: remote_risk
# asks at most its interval between fetches (default 10 s) and 1 s; a longer wait would
# outlast a default handoff lease (30 s) anyway.
MAX_KID_UNKNOWN_WAIT_SECONDS = 30.0
# How long a handoff whose remote cannot be reached at all (connection refused, no route:
# ``unreachable``) is tried again, from its first failure: long enough for a restart,
# short of a lease; after it the handoff ends FAILED ``dispatch_failed:unreachable``.
UNREACHABLE_RETRY_SECONDS = 15.0
Random = Callable[[], float]


@dataclass(frozen=True)
class RetryPolicy:
    first_backoff: float = 0.25
    multiplier: float = 2.0
    max_backoff: float = 8.0
    jitter: float = 0.5
    margin: float = 0.5
    max_attempts: int = 20
    # see UNREACHABLE_RETRY_SECONDS
    unreachable_seconds: float = UNREACHABLE_RETRY_SECONDS

    def __post_init__(self) -> None:
        if self.first_backoff <= 0 or self.multiplier < 1 or self.max_backoff < self.first_backoff:
            raise ValueError("backoff must start above 0, grow by at least 1x, and be capped")
        if not 0 <= self.jitter <= 1 or self.margin < 0 or self.max_attempts < 1:
            raise ValueError("jitter is a fraction, margin not negative, attempts at least 1")


@dataclass(frozen=True)
class Cause:
    """Why an attempt failed: a stable ``reason``, whether it is worth retrying, and the
    wait the remote asked for (seconds), if it did."""

    reason: str
    retryable: bool
    retry_after: float | None = None


def cause_of(
    error: BaseException,
    *,
    http_status: int | None = None,
    retry_after: str | None = None,
    now: datetime | None = None,
) -> Cause:
    """Classify a failed attempt; ``http_status`` and ``retry_after`` are the response's,
    when the caller has them."""
    asked = parse_retry_after(retry_after, now or datetime.now(UTC))
    if http_status is not None and (http_status >= 500 or http_status in RETRYABLE_HTTP):
        return Cause(f"http_{http_status}", True, asked)
    if isinstance(error, TransportError):
        known_refusal = http_status is not None and 400 <= http_status < 500
        retryable = error.reason in RETRYABLE_TRANSPORT and not known_refusal
        return Cause(error.reason, retryable, asked)
    if isinstance(error, RemoteA2AError):
        reason = error.error_info_reason or error.reason
        return Cause(f"remote:{reason}", error.code in RETRYABLE_JSONRPC, asked)
    if isinstance(error, TimeoutError):
        return Cause("timeout", True, asked)
    if isinstance(error, ProtocolError):
        return Cause(error.reason, error.reason in RETRYABLE_PROTOCOL, asked)
    if isinstance(error, FederationError):
        return Cause(error.reason, False, asked)
    return Cause(type(error).__name__, False, asked)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP date; None if
    absent or unreadable (then the backoff alone decides)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def backoff(policy: RetryPolicy, attempt: int, rand: Random = random.random) -> float:
    """The wait after failed attempt number ``attempt`` (1 for the first send)."""
    ceiling = min(policy.max_backoff, policy.first_backoff * policy.multiplier ** (attempt - 1))
    return ceiling * (1 - policy.jitter) + ceiling * policy.jitter * rand()


def next_delay(
    policy: RetryPolicy,
    attempt: int,
    cause: Cause,
    lease_left: float,
    rand: Random = random.random,
    failing_for: float = 0.0,
) -> float | None:
    """How long to wait before attempt ``attempt + 1``, or None to stop: the cause is
    final, the attempts are used up, the lease would be (nearly) over by then, or the
    remote has been ``unreachable`` for longer than the policy's window allows
    (``failing_for``: seconds since the handoff's first failed attempt)."""
    if not cause.retryable or attempt >= policy.max_attempts:
        return None
    delay = backoff(policy, attempt, rand)
    if cause.retry_after is not None:
        delay = max(delay, cause.retry_after)
    if lease_left - delay < policy.margin:
        return None
    if cause.reason == UNREACHABLE and failing_for + delay > policy.unreachable_seconds:
        return None
    return delay


def kid_unknown_delay(
    policy: RetryPolicy,
    attempt: int,
    refused_before: int,
    retry_after: float | None,
    lease_left: float,
    rand: Random = random.random,
) -> float | None:
    """How long to wait before sending again a handoff whose attempt ``attempt`` was
    refused ``kid_unknown`` (``refused_before``: how many of its earlier attempts were),
    or None: only once, only if the wait asked for is not too long, within the lease."""
    if refused_before > 0:
        return None
    if retry_after is not None and retry_after > MAX_KID_UNKNOWN_WAIT_SECONDS:
        return None
    return next_delay(policy, attempt, Cause(KID_UNKNOWN, True, retry_after), lease_left, rand)


def delay_left(scheduled_at: datetime, delay: float, now: datetime) -> float:
    """What is left at ``now`` of a retry's ``delay`` scheduled at ``scheduled_at`` (by
    another process, which stopped): never less than nothing, and never more than the
    delay itself, whatever the two processes' clocks say."""
    left = (scheduled_at + timedelta(seconds=delay) - now).total_seconds()
    return min(delay, max(0.0, left))


def attempt_event(attempt: int, cause: Cause, delay: float | None) -> dict[str, object]:
    """The ledger data of one failed attempt: number, cause, and the retry decided."""
    return {
        "attempt": attempt,
        "cause": cause.reason,
        "retryable": cause.retryable,
        "retry_after_s": cause.retry_after,
        "retry_in_s": None if delay is None else round(delay, 3),
    }
