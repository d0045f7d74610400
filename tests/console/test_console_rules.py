"""The console's pure parts, table by table: session expiry and bounds, the trace link
setting, the timeline's lanes and arrows, how an artifact is shown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_cards.edge.operator_secret import WRONG, OperatorSecret
from agent_cards.identity import identity_of
from agent_cards.jwk import b64url_encode
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.transparency.receipts import issue_receipt
from coordinator.audit.log.events import StoredEvent
from coordinator.audit.receipts import receipt_data
from coordinator.console.pages import CONTENT_CHARS
from coordinator.console.receipts import receipt_view
from coordinator.console.sessions import ANONYMOUS_LIFETIME_SECONDS, SessionStore
from coordinator.console.settings import ConsoleSettings
from coordinator.console.throttle import LoginThrottle
from coordinator.console.timeline import timeline
from coordinator.errors import ConfigurationError
from coordinator.service.artifact_content import shown

JAEGER = "http://127.0.0.1:16686/trace/"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_when_idle_or_old() -> None:
    clock = Clock()
    store = SessionStore(lifetime=100.0, idle=30.0, clock=clock)
    cookie, session = store.open(authenticated=True)
    for _ in range(3):  # used every 20 s: the idle clock restarts each time
        clock.now += 20
        assert store.find(cookie) is session
    clock.now += 31
    assert store.find(cookie) is None  # idle too long
    cookie, _ = store.open(authenticated=True)
    for _ in range(4):
        clock.now += 25
        store.find(cookie)
    clock.now += 1
    assert store.find(cookie) is None  # older than its lifetime, however used
    assert store.find(None) is None and store.find("never-issued") is None


def test_an_anonymous_session_is_short_and_a_closed_one_is_gone() -> None:
    clock = Clock()
    store = SessionStore(lifetime=8 * 3600.0, idle=8 * 3600.0, clock=clock)
    cookie, session = store.open(authenticated=False)
    assert session.lifetime == ANONYMOUS_LIFETIME_SECONDS
    other, _ = store.open(authenticated=True)
    store.close(other)
    assert store.find(other) is None
    clock.now += ANONYMOUS_LIFETIME_SECONDS + 1
    assert store.find(cookie) is None


def test_login_forms_cannot_push_out_logged_in_sessions() -> None:
    store = SessionStore(max_sessions=3, clock=Clock())
    kept, _ = store.open(authenticated=True)
    for _ in range(10):
        store.open(authenticated=False)
    assert store.find(kept) is not None
    assert len(store) <= 1 + 3


def test_csrf_tokens_are_per_session_and_compared_whole() -> None:
    store = SessionStore(clock=Clock())
    _, first = store.open(authenticated=True)
    _, second = store.open(authenticated=True)
    assert first.csrf != second.csrf
    assert first.csrf_matches(first.csrf)
    assert not first.csrf_matches(second.csrf)
    assert not first.csrf_matches(first.csrf[:-1])
    assert not first.csrf_matches("")


@pytest.mark.parametrize(
    ("template", "trace_id", "link"),
    [
        (None, "ab" * 16, None),
        (JAEGER + "{trace_id}", "ab" * 16, JAEGER + "ab" * 16),
        ("https://127.0.0.1/t/{trace_id}?x", "0" * 32, "https://127.0.0.1/t/" + "0" * 32 + "?x"),
        (JAEGER + "{trace_id}", "not-a-trace-id", None),
        (JAEGER + "{trace_id}", None, None),
    ],
)  # fmt: skip
def test_the_trace_link(template: str | None, trace_id: str | None, link: str | None) -> None:
    assert ConsoleSettings(trace_url_template=template).trace_url(trace_id) == link


@pytest.mark.parametrize(
    "template",
    ["javascript:alert(1)//{trace_id}", "http://x/trace", "http://x/{trace_id}/{trace_id}"],
)
def test_a_trace_link_setting_outside_http_is_refused(
    template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coordinator.console.settings import load_console_settings

    monkeypatch.setenv("FEDERATION_TRACE_URL_TEMPLATE", template)
    with pytest.raises(ConfigurationError):
        load_console_settings()


def event(seq: int, event_type: str, handoff: str | None = "ho-1", **data: Any) -> StoredEvent:
    return StoredEvent(
        seq=seq,
        prev_hash="",
        hash="",
        event_type=event_type,
        recorded_at=datetime(2026, 1, 1, tzinfo=UTC),
        actor="coordinator",
        data=data,
        run_id="run-1",
        handoff_id=handoff,
        attempt=1 if handoff else None,
    )


def test_the_timeline_puts_each_event_in_its_lane() -> None:
    document = {
        "branches": [
            {"branch": "ho-0/1", "target": "operations"},
            {"branch": "ho-1/1", "target": "remote-risk"},
        ]
    }
    events = [
        event(1, "run.started", None),
        event(2, "handoff.local", "ho-0"),
        event(3, "handoff.admitted"),
        event(4, "message.dispatched", endpoint="http://127.0.0.1:1/a2a"),
        event(5, "remote.state_observed", remote_state="TASK_STATE_WORKING"),
        event(6, "artifact.rejected", contract="finding", reason="schema_mismatch"),
    ]
    lanes, rows = timeline(document, events)
    assert lanes == ["coordinator", "operations", "remote-risk"]
    assert [row.lane for row in rows] == [
        "coordinator", "operations", "coordinator", "remote-risk", "remote-risk", "coordinator",
    ]  # fmt: skip
    assert [c.kind for c in rows[1].cells] == ["empty", "event", "empty"]
    [arrow] = rows[3].cells
    assert (arrow.kind, arrow.span, arrow.direction) == ("arrow", 3, "out")
    assert rows[4].cells[0].direction == "in" and rows[4].detail == "TASK_STATE_WORKING"
    assert rows[5].detail == "finding: schema_mismatch" and rows[5].category == "return"
    assert all(sum(c.span for c in row.cells) == len(lanes) for row in rows)


def test_a_hop_of_a_delegation_chain_is_drawn_with_its_target_and_budget() -> None:
    budget = {"actions": 1, "context_units": 40, "effects": 0}
    events = [
        event(1, "delegation.exchanged", None, to="legal-terms", depth=2, scope="terms:check",
              budget=budget, parent_jti="jti-a"),
        event(2, "delegation.exchange_refused", None, reason="chain_loop", parent_jti="jti-a"),
    ]  # fmt: skip
    _, rows = timeline({"branches": []}, events)
    assert rows[0].detail == (
        "child token to legal-terms (depth 2): scope terms:check; "
        "actions 1, context_units 40, effects 0; parent jti-a"
    )
    assert rows[1].detail == "exchange refused (chain_loop) from parent jti-a"
    assert {row.category for row in rows} == {"grant"}


def test_an_artifact_is_shown_part_by_part_as_text() -> None:
    content = [
        {
            "artifactId": "a1",
            "name": "result",
            "parts": [{"text": "<b>hi</b>"}, {"data": {"k": "<i>"}}, {"url": "http://x"}],
        }
    ]
    assert shown(content, CONTENT_CHARS).splitlines() == [
        "artifact a1 (result):",
        "  text: <b>hi</b>",
        '  data: {"k": "<i>"}',
        '  part: {"url": "http://x"}',
    ]
    assert shown({"not": "artifacts"}, CONTENT_CHARS) == '{"not": "artifacts"}'
    assert shown("x" * 30_000, CONTENT_CHARS).endswith("(cut to fit)")


def test_failed_logins_are_throttled_per_key() -> None:
    clock = Clock()
    throttle = LoginThrottle(attempts=3, window=60.0, max_clients=2, clock=clock)
    for _ in range(3):
        assert throttle.retry_after("10.0.0.1") is None
        throttle.failed("10.0.0.1")
        clock.now += 1
    assert throttle.retry_after("10.0.0.1") == pytest.approx(57.0)
    assert throttle.retry_after("10.0.0.2") is None  # another client is not held up
    assert throttle.retry_after("10.0.0.2", "10.0.0.1") == pytest.approx(57.0)  # either key
    clock.now += 58
    assert throttle.retry_after("10.0.0.1") is None  # the first failure left the window
    for client in ("a", "b", "c"):
        throttle.failed(client)
    assert len(throttle._failures) <= 2


def test_the_right_token_always_passes_and_resets_nothing() -> None:
    """A wrong token is held once its address or its fingerprint failed too often; the
    right one passes from a held address and leaves the count as it was."""
    secret = OperatorSecret("console-operator-token-0123456789")
    throttle = LoginThrottle(attempts=2, window=60.0, clock=Clock())
    for guess in (b"one", b"two"):
        assert secret.judge(guess, "10.0.0.1", throttle) == WRONG
    assert secret.judge(b"three", "10.0.0.1", throttle).retry_after is not None
    assert secret.judge(b"console-operator-token-0123456789", "10.0.0.1", throttle).passed
    assert secret.judge(b"four", "10.0.0.1", throttle).retry_after is not None
    assert secret.judge(b"stale", "10.0.0.2", throttle) == WRONG
    assert secret.judge(b"stale", "10.0.0.3", throttle) == WRONG
    assert secret.judge(b"stale", "10.0.0.4", throttle).retry_after is not None
    assert "console-operator" not in repr(secret)


@pytest.mark.parametrize(("scheme", "secure"), [("https", True), ("http", False)])
def test_the_session_cookie_is_secure_over_tls(scheme: str, secure: bool) -> None:
    from starlette.requests import Request
    from starlette.responses import Response

    from coordinator.console.routes import set_cookie

    scope = {"type": "http", "scheme": scheme, "path": "/console/login", "headers": []}
    response = Response()
    set_cookie(Request(scope), response, "value")
    cookie = response.headers["set-cookie"]
    assert ("; secure" in cookie.lower()) is secure
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()


def test_a_receipt_is_shown_as_its_fields_and_checked_with_the_pinned_keys() -> None:
    """Verified with the key pinned for its agent; not verified once that key is pinned
    for no agent, nor when its payload was changed."""
    key = SigningKey.generate()
    claims = {"iss": identity_of(key.verification_key()), "task_id": "t-1", "attempt": 1}
    data = receipt_data(issue_receipt(claims, key))
    pinned = {"other": TrustedKeys([SigningKey.generate().verification_key()])}
    pinned["risk"] = TrustedKeys([key.verification_key()])

    view = receipt_view(data, pinned)
    assert view.verified and view.verdict == "verified with the key pinned for risk"
    assert dict(view.fields)["task_id"] == "t-1" and dict(view.fields)["attempt"] == "1"
    assert dict(view.fields)["kid"] == key.kid

    assert not receipt_view(data, {"other": pinned["other"]}).verified
    payload = b64url_encode(json.dumps({**claims, "task_id": "t-2"}).encode())
    changed = {**data, "receipt": {**data["receipt"], "payload": payload}}
    refused = receipt_view(changed, pinned)
    assert not refused.verified and "does not verify" in refused.verdict
    assert dict(refused.fields)["task_id"] == "t-2"  # shown, as what it claims
    assert receipt_view({"kid": "x"}, pinned).verdict.startswith("not verified")
