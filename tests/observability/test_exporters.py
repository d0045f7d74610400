"""Exporters chosen by the standard OpenTelemetry variables, and service names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from coordinator.telemetry import tracing as coordinator_tracing
from member_kit.telemetry import tracing as risk_tracing


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, ["console", "otlp"]),
    ],
)
def test_exporters_follow_the_standard_variables(env: dict[str, str], expected: list[str]) -> None:
    assert coordinator_tracing.exporter_names(env) == expected
    assert risk_tracing.exporter_names(env) == expected


def test_service_names_default_and_override() -> None:
    for module, default in ((coordinator_tracing, "coordinator"), (risk_tracing, "remote-risk")):
        built = module.build_provider({})
        assert isinstance(built, TracerProvider)
        assert built.resource.attributes["service.name"] == default
        named = module.build_provider({"OTEL_SERVICE_NAME": "team-a"})
        assert isinstance(named, TracerProvider)
        assert named.resource.attributes["service.name"] == "team-a"


def test_sdk_disabled_means_no_spans_and_a_random_run_trace() -> None:
    built = coordinator_tracing.build_provider({"OTEL_SDK_DISABLED": "true"})
    assert not isinstance(built, TracerProvider)


def test_console_exporter_writes_one_json_span_per_line_to_stderr() -> None:
    script = (
        "from coordinator.telemetry import tracing\n"
        "with tracing.span('federation.run', {'federation.run_id': 'run-1'}):\n"
        "    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"OTEL_TRACES_EXPORTER": "console", "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    (span,) = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert span["name"] == "federation.run"
    assert span["resource"]["attributes"]["service.name"] == "coordinator"
