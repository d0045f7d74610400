"""Every member on the kit reports under its own name, not remote_risk's.

The legal team's member (``examples/terms_member.py``, its ``Member`` named
``legal_terms``) runs as its own process on loopback: its ``/metrics`` (behind
``LEGAL_TERMS_METRICS_TOKEN``) names only ``legal_terms_*`` metrics, its access lines are
on the ``legal_terms.access`` logger (JSON on stderr, by ``LEGAL_TERMS_LOG_FORMAT``), and
its edge limits are read from ``LEGAL_TERMS_*`` variables while remote_risk's
``REMOTE_RISK_*`` ones leave it alone. In one process, a remote_risk app and a terms app
(and two remote_risk apps) each count only their own requests on their own ``/metrics``,
and the terms member's spans are service ``legal-terms``'s, named ``legal_terms.*``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from agent_cards.identity import THUMBPRINT_URI_PREFIX
from contracts import strict_json
from member_kit.server.app import JSONRPC_PATH
from member_kit.telemetry.names import TelemetryNames
from member_kit.telemetry.tracing import tracing_for
from tests import tokens
from tests.members import MEMBERS
from tests.observability.spans import eventually
from tests.remote_risk.delegated import delegated_service
from tests.servers import free_port, running

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "terms_member.py"
ISSUER = "coordinator"
METRICS_TOKEN = "legal-terms-metrics-token-0123456789"
AUDIT_TOKEN = "legal-terms-audit-token-0123456789ab"
BODY_LIMIT = 2000  # LEGAL_TERMS_MAX_BODY_BYTES
OTHER_LIMIT = 100  # REMOTE_RISK_MAX_BODY_BYTES: remote_risk's, not this member's


def member_env(**extra: str) -> dict[str, str]:
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("LEGAL_TERMS_", "REMOTE_RISK_"))
    }
    return {**inherited, **extra}


@pytest.fixture
def terms(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """(the member's URL, a token for it, its process) for the example run as a process."""
    jwks = tmp_path / "coordinator.jwks.json"
    jwks.write_bytes(strict_json.dumps({"keys": [tokens.COORDINATOR_KEY.public_jwk()]}))
    env = member_env(
        LEGAL_TERMS_METRICS_TOKEN=METRICS_TOKEN,
        LEGAL_TERMS_AUDIT_TOKEN=AUDIT_TOKEN,
        LEGAL_TERMS_LOG_FORMAT="json",
        LEGAL_TERMS_MAX_BODY_BYTES=str(BODY_LIMIT),
        REMOTE_RISK_MAX_BODY_BYTES=str(OTHER_LIMIT),
    )
    args = ["--data-dir", str(tmp_path / "terms"), "--trust-issuer", f"{ISSUER}={jwks}"]
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("legal_terms listening on "), first
        kid = process.stdout.readline().split("kid ", 1)[1].split(";", 1)[0]
        yield first.rpartition(" ")[2], token_for(THUMBPRINT_URI_PREFIX + kid), process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)


def token_for(audience: str) -> str:
    claims = tokens.delegation_claims(
        now=int(time.time()), issuer=ISSUER, audience=audience, scope="terms:check"
    )
    return tokens.forge(tokens.header(), claims)


def get_task(url: str, token: str, size: int) -> httpx.Response:
    """A GetTask whose body is about ``size`` bytes (the task id pads it)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t" * size}}
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    return httpx.post(url + JSONRPC_PATH, json=body, headers=headers, timeout=10)


def metric_names(text: str) -> set[str]:
    """Every family's and every sample's name (a counter's family drops ``_total``)."""
    families = list(text_string_to_metric_families(text))
    return {f.name for f in families} | {s.name for f in families for s in f.samples}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def scrape(url: str, token: str) -> str:
    answer = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.text


def stopped(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_the_terms_member_reports_under_its_own_names(
    terms: tuple[str, str, subprocess.Popen[str]],
) -> None:
    """Its metrics, its access logger and its limit variables are its own."""
    url, token, process = terms
    # within its own limit (beyond remote_risk's): answered; beyond its own: refused
    assert get_task(url, token, BODY_LIMIT // 2).json()["error"]["code"] == -32001
    refused = get_task(url, token, BODY_LIMIT * 2)
    assert refused.status_code == 413, refused.text

    text = scrape(url, METRICS_TOKEN)
    names = metric_names(text)
    assert "legal_terms_a2a_requests_total" in names
    assert "legal_terms_http_request_duration_seconds" in names
    assert all(name.startswith("legal_terms_") for name in names), sorted(names)
    assert "remote_risk" not in text
    assert 'method="GetTask",outcome="TASK_NOT_FOUND"' in text

    # its audit routes: behind its own token, challenging in its own realm
    challenged = httpx.get(url + "/audit/head", timeout=10)
    assert challenged.status_code == 401
    assert challenged.headers["WWW-Authenticate"] == 'Bearer realm="legal-terms-audit"'
    audited = httpx.get(url + "/audit/head", headers=bearer(AUDIT_TOKEN), timeout=10)
    assert audited.status_code == 200, audited.text

    loggers = {line["logger"] for line in stopped(process)}
    assert "legal_terms.access" in loggers
    assert not any(name.startswith("remote_risk") for name in loggers), loggers


@pytest.fixture
def side_by_side() -> Iterator[dict[str, str]]:
    """Two remote_risk apps and a terms app served by this one process (name -> URL)."""
    apps = {}
    for name, member in (("risk-a", "remote_risk"), ("risk-b", "remote_risk"), ("terms", "terms")):
        port = free_port()
        settings = {"public_base_url": f"http://127.0.0.1:{port}", "metrics_token": METRICS_TOKEN}
        apps[name] = (MEMBERS[member].create_app(**settings), port)
    with (
        running(*apps["risk-a"]) as risk_a,
        running(*apps["risk-b"]) as risk_b,
        running(*apps["terms"]) as terms_url,
    ):
        yield {"risk-a": risk_a, "risk-b": risk_b, "terms": terms_url}


def counted(url: str, method: str) -> float:
    text = scrape(url, METRICS_TOKEN)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_a2a_requests_total") and sample.labels["method"] == method:
                return float(sample.value)
    return 0.0


def test_apps_in_one_process_each_export_only_their_own_metrics(
    side_by_side: dict[str, str],
) -> None:
    """A request to one app moves that app's counter only; names stay per member."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}
    for _ in range(3):
        httpx.post(side_by_side["risk-a"] + JSONRPC_PATH, json=call, timeout=10)
    httpx.post(side_by_side["terms"] + JSONRPC_PATH, json=call, timeout=10)

    assert counted(side_by_side["risk-a"], "GetTask") == 3
    assert counted(side_by_side["risk-b"], "GetTask") == 0
    assert counted(side_by_side["terms"], "GetTask") == 1
    risk_names = metric_names(scrape(side_by_side["risk-b"], METRICS_TOKEN))
    terms_names = metric_names(scrape(side_by_side["terms"], METRICS_TOKEN))
    assert all(name.startswith("remote_risk_") for name in risk_names), sorted(risk_names)
    assert all(name.startswith("legal_terms_") for name in terms_names), sorted(terms_names)


@pytest.fixture
def terms_spans() -> Iterator[InMemorySpanExporter]:
    """The spans of the service ``legal-terms`` in this process (its own tracer provider)."""
    exporter = InMemorySpanExporter()
    tracing_for(TelemetryNames.of("legal_terms")).add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        exporter.shutdown()


def test_the_terms_members_spans_are_its_own(terms_spans: InMemorySpanExporter) -> None:
    """Service ``legal-terms``, span names and attributes under ``legal_terms.``."""
    with delegated_service(member=MEMBERS["terms"]) as (caller, _app):
        assert caller.send("run-1", "h-spans").status_code == 200
        eventually(lambda: any(s.kind is SpanKind.SERVER for s in terms_spans.get_finished_spans()))
    spans = terms_spans.get_finished_spans()
    names = {span.name for span in spans}
    assert {"legal_terms.authenticate_token", "legal_terms.skill"} <= names, names
    assert {span.resource.attributes["service.name"] for span in spans} == {"legal-terms"}
    keys = {key for span in spans for key in (span.attributes or {})}
    assert "legal_terms.skill_id" in keys
    assert not any(key.startswith("remote_risk") for key in keys | names), keys | names
