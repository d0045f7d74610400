"""Spans nobody receives are not recorded, but their trace still joins up and propagates.

With no exporter, no processor and no sampler configured, a service's spans are
non-recording spans with real ids: a child continues its parent's trace, an incoming
``traceparent`` is continued with its flags, an outgoing request carries one, and once a
processor is added the spans are recorded and reach it.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_cards.telemetry.tracing import ServiceTracing, current_trace_id, extract, inject

INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


def quiet() -> ServiceTracing:
    service = ServiceTracing("test-service", "test")
    service.configure({})
    return service


def test_a_span_nobody_receives_records_nothing_but_has_real_ids() -> None:
    service = quiet()
    with service.span("outer", {"test.attribute": "value"}) as outer:
        assert not outer.is_recording()
        trace_id = current_trace_id()
        assert trace_id is not None and int(trace_id, 16) != 0
        with service.span("inner") as inner:
            assert inner.get_span_context().trace_id == outer.get_span_context().trace_id
            assert inner.get_span_context().span_id != outer.get_span_context().span_id
            headers = inject({})
        assert headers["traceparent"].split("-")[1] == trace_id
        assert headers["traceparent"].endswith("-01")  # sampled, as the default sampler says
    assert current_trace_id() is None


def test_an_incoming_traceparent_is_continued_with_its_flags() -> None:
    service = quiet()
    with service.span("server", parent=extract({"traceparent": INCOMING})):
        headers = inject({})
    _, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert span_id != "00f067aa0ba902b7" and flags == "00"


def test_a_processor_added_later_receives_recorded_spans() -> None:
    service = quiet()
    exporter = InMemorySpanExporter()
    service.add_span_processor(SimpleSpanProcessor(exporter))
    with service.span("heard", {"test.attribute": "value"}) as heard:
        assert heard.is_recording()
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "heard" and (finished.attributes or {})["test.attribute"] == "value"


def test_a_named_sampler_or_exporter_keeps_spans_recorded() -> None:
    for env in ({"OTEL_TRACES_SAMPLER": "always_on"}, {"OTEL_TRACES_EXPORTER": "console"}):
        service = ServiceTracing("test-service", "test")
        service.configure(env)
        with service.span("recorded") as span:
            assert span.is_recording(), env


def test_an_internal_step_nobody_receives_makes_no_span() -> None:
    """Issue 34: an internal step's span costs nothing without a receiver (the enclosing
    span stays current, its trace in the logs); with a processor it is recorded."""
    service = quiet()
    with service.span("outer") as outer, service.internal_span("step", {"a": "value"}):
        current = trace.get_current_span()
        assert current.get_span_context().span_id == outer.get_span_context().span_id
    exporter = InMemorySpanExporter()
    service.add_span_processor(SimpleSpanProcessor(exporter))
    with service.span("outer"), service.internal_span("step", {"test.attribute": "value"}):
        pass
    names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["step", "outer"]
