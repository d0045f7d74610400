"""In-memory span exporters on both services' tracer providers, for the length of a test.

Each service has its own provider (see ``coordinator.telemetry.tracing`` and
``member_kit.telemetry.tracing``); one exporter is added to each for the whole test
process and cleared before every test that reads it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coordinator.telemetry import tracing as coordinator_tracing
from member_kit.telemetry import tracing as risk_tracing

_exporters: dict[str, InMemorySpanExporter] = {}


def _exporter(service: str) -> InMemorySpanExporter:
    if service not in _exporters:
        exporter = InMemorySpanExporter()
        module = coordinator_tracing if service == "coordinator" else risk_tracing
        module.add_span_processor(SimpleSpanProcessor(exporter))
        _exporters[service] = exporter
    return _exporters[service]


@dataclass
class Captured:
    coordinator: InMemorySpanExporter
    remote: InMemorySpanExporter

    def spans(self, side: str) -> list[ReadableSpan]:
        exporter = self.coordinator if side == "coordinator" else self.remote
        return list(exporter.get_finished_spans())

    def named(self, side: str, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans(side) if s.name == name]


@pytest.fixture
def captured() -> Iterator[Captured]:
    both = Captured(_exporter("coordinator"), _exporter("remote"))
    both.coordinator.clear()
    both.remote.clear()
    yield both


def eventually(check: Callable[[], bool], within: float = 10.0) -> None:
    """Wait for ``check`` (a server span ends just after its response has been sent)."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the expected spans never ended"
        time.sleep(0.01)


def trace_hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


def span_hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


def parent_hex(span: ReadableSpan) -> str | None:
    return format(span.parent.span_id, "016x") if span.parent is not None else None


def attribute_values(spans: list[ReadableSpan]) -> list[Any]:
    return [value for span in spans for value in (span.attributes or {}).values()]
