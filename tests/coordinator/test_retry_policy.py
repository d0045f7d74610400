"""The retry rules: what is retried, the backoff with jitter, Retry-After, the lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contracts.a2a_errors import ERROR_INFO_TYPE
from coordinator.dispatch.retry import (
    MAX_KID_UNKNOWN_WAIT_SECONDS,
    Cause,
    RetryPolicy,
    attempt_event,
    backoff,
    cause_of,
    delay_left,
    kid_unknown_delay,
    next_delay,
    parse_retry_after,
)
from coordinator.errors import ProtocolError, RemoteA2AError, TransportError
from coordinator.remote.wire.jsonrpc import jsonrpc_result
from coordinator.remote.wire.wire_errors import remote_error

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
POLICY = RetryPolicy(first_backoff=0.5, multiplier=2, max_backoff=4, jitter=0.5, margin=0.5)


@pytest.mark.parametrize(
    ("error", "status", "reason", "retryable"),
    [
        (TransportError("x", "unreachable"), None, "unreachable", True),
        (TransportError("x", "timeout"), None, "timeout", True),
        (TransportError("x", "transport_error"), None, "transport_error", True),
        (TransportError("x", "http_status"), 503, "http_503", True),
        (TransportError("x", "http_status"), 502, "http_502", True),
        (TransportError("x", "http_status"), 429, "http_429", True),
        (TransportError("x", "http_status"), 404, "http_status", False),
        (TransportError("x", "bad_url"), None, "bad_url", False),
        (
            RemoteA2AError(-32603, "at capacity", "INTERNAL_ERROR"),
            None,
            "remote:INTERNAL_ERROR",
            True,
        ),
        (RemoteA2AError(-32092, "replay record", "UNAVAILABLE"), 503, "http_503", True),
        (RemoteA2AError(-32090, "token", "UNAUTHENTICATED"), 401, "remote:UNAUTHENTICATED", False),
        (RemoteA2AError(-32602, "params", "INVALID_PARAMS"), None, "remote:INVALID_PARAMS", False),
        (ProtocolError("x", "not_jsonrpc"), None, "not_jsonrpc", True),
        (ProtocolError("x", "not_json"), None, "not_json", True),
        (ProtocolError("x", "id_mismatch"), None, "id_mismatch", False),
        (TimeoutError(), None, "timeout", True),
        (ValueError("bug"), None, "ValueError", False),
    ],
)
def test_what_is_retried(
    error: BaseException, status: int | None, reason: str, retryable: bool
) -> None:
    cause = cause_of(error, http_status=status, now=NOW)
    assert (cause.reason, cause.retryable) == (reason, retryable)


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert parse_retry_after("7", NOW) == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:03 GMT", NOW) == 3.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", NOW) == 0.0
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after(None, NOW) is None
    cause = cause_of(TransportError("x", "http_status"), http_status=503, retry_after="2", now=NOW)
    assert cause == Cause("http_503", True, 2.0)


def test_backoff_doubles_to_its_cap_with_a_bounded_random_part() -> None:
    lowest = [backoff(POLICY, attempt, lambda: 0.0) for attempt in range(1, 7)]
    highest = [backoff(POLICY, attempt, lambda: 1.0) for attempt in range(1, 7)]
    assert highest == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert lowest == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert RetryPolicy(jitter=0).first_backoff == backoff(RetryPolicy(jitter=0), 1, lambda: 0.9)


def test_retry_after_is_honoured_and_the_lease_is_never_passed() -> None:
    down = Cause("unreachable", True)
    assert next_delay(POLICY, 1, down, lease_left=30, rand=lambda: 1.0) == 0.5
    asked = Cause("http_503", True, retry_after=5.0)
    assert next_delay(POLICY, 1, asked, lease_left=30, rand=lambda: 1.0) == 5.0
    assert next_delay(POLICY, 1, asked, lease_left=5.4, rand=lambda: 1.0) is None
    assert next_delay(POLICY, 3, down, lease_left=2.4, rand=lambda: 1.0) is None  # 2 s + margin
    assert next_delay(POLICY, 3, down, lease_left=2.6, rand=lambda: 1.0) == 2.0


def test_final_causes_and_used_up_attempts_stop() -> None:
    assert next_delay(POLICY, 1, Cause("remote:INVALID_PARAMS", False), lease_left=30) is None
    limited = RetryPolicy(max_attempts=3)
    down = Cause("unreachable", True)
    assert next_delay(limited, 2, down, lease_left=30) is not None
    assert next_delay(limited, 3, down, lease_left=30) is None


def test_every_attempt_is_described_for_the_ledger() -> None:
    event = attempt_event(2, Cause("http_503", True, 2.0), 2.0)
    assert event == {
        "attempt": 2,
        "cause": "http_503",
        "retryable": True,
        "retry_after_s": 2.0,
        "retry_in_s": 2.0,
    }
    assert attempt_event(3, Cause("remote:INVALID_PARAMS", False), None)["retry_in_s"] is None


def test_a_policy_that_makes_no_sense_is_refused() -> None:
    for bad in ({"first_backoff": 0}, {"multiplier": 0.5}, {"jitter": 2}, {"max_attempts": 0}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)  # type: ignore[arg-type]


# --- a key the remote does not know yet (issue 31, 6) ------------------------------------


def test_a_kid_unknown_refusal_is_retried_once_after_the_wait_the_remote_asked_for() -> None:
    """Once, after the remote's Retry-After (the backoff if it gave none); not a second
    time, not when the wait asked for is too long, not past the lease."""
    assert kid_unknown_delay(POLICY, 1, 0, 7.0, lease_left=30, rand=lambda: 1.0) == 7.0
    assert kid_unknown_delay(POLICY, 1, 0, None, lease_left=30, rand=lambda: 1.0) == 0.5
    assert kid_unknown_delay(POLICY, 3, 1, 7.0, lease_left=30) is None
    too_long = MAX_KID_UNKNOWN_WAIT_SECONDS + 1
    assert kid_unknown_delay(POLICY, 1, 0, too_long, lease_left=300) is None
    assert kid_unknown_delay(POLICY, 1, 0, 7.0, lease_left=7.4) is None


@pytest.mark.parametrize(
    ("metadata", "reason", "retry_after"),
    [
        ({"reason": "kid_unknown", "retryAfterSeconds": "11"}, "kid_unknown", 11.0),
        ({"reason": "kid_unknown"}, "kid_unknown", None),
        ({"reason": "token_expired", "retryAfterSeconds": "9" * 9}, "token_expired", None),
        ({"reason": "kid_unknown", "retryAfterSeconds": "²"}, "kid_unknown", None),
        ({"reason": "kid_unknown", "retryAfterSeconds": "-3"}, "kid_unknown", None),
        ({"reason": "Kid Unknown\n"}, "DelegationUnauthenticatedError", None),
        ({}, "DelegationUnauthenticatedError", None),
    ],
)
def test_a_token_refusal_is_named_by_its_code_on_every_binding(
    metadata: dict[str, str], reason: str, retry_after: float | None
) -> None:
    """The refusal's code and the wait asked for are read from the ErrorInfo metadata the
    same way whether it came in a JSON-RPC error or in a google.rpc.Status (HTTP+JSON, gRPC)."""
    info = {"@type": ERROR_INFO_TYPE, "reason": "UNAUTHENTICATED", "metadata": metadata}
    document = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32090, "message": "x", "data": [info]},
    }
    with pytest.raises(RemoteA2AError) as jsonrpc:
        jsonrpc_result(document, 1, "SendMessage", "http://127.0.0.1:9")
    status = remote_error("UNAUTHENTICATED", "x", [info], "SendMessage")
    for error in (jsonrpc.value, status):
        assert (error.reason, error.retry_after) == (reason, retry_after)


def test_another_errors_metadata_reason_is_not_taken_for_a_refusal() -> None:
    error = RemoteA2AError(-32602, "bad", "INVALID_PARAMS", {"reason": "kid_unknown"})
    assert error.reason == "InvalidParamsError" and error.refusal is None


def test_a_retry_left_by_a_stopped_process_waits_what_is_left_of_its_delay() -> None:
    """Recovery's rule: the rest of the delay from when it was scheduled, never less than
    nothing and never more than the delay itself (a scheduling process whose clock ran
    ahead must not hold the retry for as long as the clocks differ)."""
    at = datetime(2026, 12, 5, 12, 0, 0, tzinfo=UTC)
    assert delay_left(at, 4.0, at + timedelta(seconds=1)) == 3.0
    assert delay_left(at, 4.0, at + timedelta(seconds=9)) == 0.0
    assert delay_left(at, 4.0, at - timedelta(hours=1)) == 4.0  # scheduled "in the future"
