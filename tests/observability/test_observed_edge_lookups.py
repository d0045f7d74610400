"""What the observed HTTP edge looks up once rather than on every request (issue 34): the
trace context headers alone, a labelled metric's children, and no span at all for an
internal step nobody receives; each gives what the full lookup gave."""

from __future__ import annotations

from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter

from agent_cards.telemetry.http import trace_headers
from agent_cards.telemetry.metrics import children
from agent_cards.telemetry.tracing import ServiceTracing, extract

INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
EARLIER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_trace_context_is_read_as_from_all_the_headers() -> None:
    raw = [
        (b"host", b"x"),
        (b"traceparent", EARLIER.encode()),
        (b"authorization", b"Bearer secret"),
        (b"traceparent", INCOMING.encode()),
        (b"tracestate", b"vendor=1"),
    ]
    every = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw}
    picked = trace_headers({"headers": raw})
    assert picked == {"traceparent": INCOMING, "tracestate": "vendor=1"}
    assert "authorization" not in picked
    context = trace.get_current_span(extract(picked)).get_span_context()
    assert context == trace.get_current_span(extract(every)).get_span_context()


def test_a_kept_child_is_the_metric_s_own() -> None:
    registry = CollectorRegistry()
    counter = Counter("edge_test_total", "test", ["method", "outcome"], registry=registry)
    child = children(counter)
    child("SendMessage", "ok").inc()
    child("SendMessage", "ok").inc()
    child("GetTask", "ok").inc()
    assert child("SendMessage", "ok") is counter.labels("SendMessage", "ok")
    assert (
        registry.get_sample_value("edge_test_total", {"method": "SendMessage", "outcome": "ok"})
        == 2
    )
    assert registry.get_sample_value("edge_test_total", {"method": "GetTask", "outcome": "ok"}) == 1


def test_an_internal_step_nobody_receives_is_given_the_invalid_span() -> None:
    service = ServiceTracing("test-service", "test")
    service.configure({})
    with service.span("request") as request, service.internal_span("step") as step:
        assert step is trace.INVALID_SPAN and not step.is_recording()
        assert trace.get_current_span() is request
