"""One trace from the operator's request through remote_risk and back (issue 16).

A real coordinator API and a real remote_risk, each on loopback, each with an in-memory
span exporter on its own tracer provider: the coordinator's spans and remote_risk's share
one trace id, remote_risk's request span is a child of the coordinator's A2A call span,
and the run's ledger events, run document and remote decision log all carry that id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_api import PAYLOAD, TOKEN, Deployment, deployed
from tests.observability.spans import (
    Captured,
    attribute_values,
    eventually,
    parent_hex,
    span_hex,
    trace_hex,
)

OPERATOR_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OPERATOR_TRACEPARENT = f"00-{OPERATOR_TRACE}-00f067aa0ba902b7-01"


class Recorder:
    """ASGI wrapper that remembers each request's headers (to find the bearer token)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers: list[dict[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.fixture
def observed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Deployment, Recorder]]:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    recorders: list[Recorder] = []

    def wrap(app: Any) -> Recorder:
        recorders.append(Recorder(app))
        return recorders[0]

    with deployed(DataDir(tmp_path / "data"), wrap_risk=wrap) as deployment:
        assert deployment.register().status_code == 200
        recorders[0].headers.clear()  # registration's own call (its extended card) is no run's
        yield deployment, recorders[0]


def delegate(deployment: Deployment, **headers: str) -> dict[str, Any]:
    body = {"to": "remote-risk", "skill": "interpret-risk-policy", "input": PAYLOAD, "wait": True}
    answer = deployment.http.post("/v1/delegations", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    assert document["local_state"] == "ACCEPTED"
    return document


def ledger_trace_ids(deployment: Deployment, run_id: str) -> set[str | None]:
    ws = Workspace(DataDir(deployment.data))
    try:
        return {event.trace_id for event in ws.ledger().events(run_id)}
    finally:
        ws.close()


def access_lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[dict[str, Any]]:
    return [getattr(r, "fields", {}) for r in caplog.records if r.name == logger]


def test_one_trace_from_the_coordinator_through_remote_risk(
    observed: tuple[Deployment, Recorder], captured: Captured, caplog: pytest.LogCaptureFixture
) -> None:
    deployment, _ = observed
    caplog.set_level(logging.INFO)
    document = delegate(deployment)
    trace_id = document["trace_id"]
    assert len(trace_id) == 32 and int(trace_id, 16) != 0

    def ended(side: str, name: str) -> bool:
        return any(trace_hex(s) == trace_id for s in captured.named(side, name))

    eventually(lambda: ended("coordinator", "POST /v1/delegations"))
    eventually(lambda: ended("remote", "remote_risk.skill"))
    eventually(
        lambda: any(
            (s.attributes or {}).get("remote_risk.a2a_method") == "SendStreamingMessage"
            for s in captured.named("remote", "POST /a2a/jsonrpc")
            if trace_hex(s) == trace_id
        )
    )
    mine = [s for s in captured.spans("coordinator") if trace_hex(s) == trace_id]
    names = {s.name for s in mine}
    for step in (
        "POST /v1/delegations",
        "federation.run",
        "federation.handoff",
        "federation.admission",
        "federation.mint",
        "federation.dispatch",
        "federation.return_admission",
        "federation.ledger.append",
        "a2a/SendStreamingMessage",
    ):
        assert step in names, f"{step} missing from {sorted(names)}"

    theirs = [s for s in captured.spans("remote") if trace_hex(s) == trace_id]
    remote_names = {s.name for s in theirs}
    for step in ("POST /a2a/jsonrpc", "remote_risk.verify_token", "remote_risk.claim_token"):
        assert step in remote_names, f"{step} missing from {sorted(remote_names)}"
    assert "remote_risk.create_task" in remote_names
    assert "remote_risk.skill" in remote_names

    # Parent links across the hop: remote_risk's request span is a child of a call span.
    calls = {span_hex(s): s for s in mine if s.name.startswith("a2a/")}
    servers = [s for s in theirs if s.name == "POST /a2a/jsonrpc"]
    assert servers and all(parent_hex(s) in calls for s in servers)
    sent = [
        s
        for s in servers
        if (s.attributes or {}).get("remote_risk.a2a_method") == "SendStreamingMessage"
    ]
    assert sent and calls[parent_hex(sent[0]) or ""].name == "a2a/SendStreamingMessage"

    # The join key: every ledger event of the run, and the remote's decision log.
    assert ledger_trace_ids(deployment, document["run_id"]) == {trace_id}
    decisions = [
        d
        for d in deployment.risk_app.state.decisions
        if d.allowed and d.method != "GetExtendedAgentCard"  # registration's, in no run
    ]
    assert decisions and {d.trace_id for d in decisions} == {trace_id}
    shown = deployment.http.get(f"/v1/audit/runs/{document['run_id']}").json()
    assert shown["trace_id"] == trace_id

    # Each service's access log line names the trace (and remote_risk's the A2A method).
    (ours,) = [
        line
        for line in access_lines(caplog, "coordinator.access")
        if line["path"] == "/v1/delegations"
    ]
    assert (ours["trace_id"], ours["status"]) == (trace_id, 200)
    theirs_lines = [
        line for line in access_lines(caplog, "remote_risk.access") if line["trace_id"] == trace_id
    ]
    assert "SendStreamingMessage" in {line.get("a2a_method") for line in theirs_lines}


def test_the_operators_traceparent_is_joined(
    observed: tuple[Deployment, Recorder], captured: Captured
) -> None:
    deployment, recorder = observed
    document = delegate(deployment, traceparent=OPERATOR_TRACEPARENT)
    assert document["trace_id"] == OPERATOR_TRACE
    a2a_requests = [h for h in recorder.headers if h.get("content-type") == "application/json"]
    assert a2a_requests
    assert all(h["traceparent"].split("-")[1] == OPERATOR_TRACE for h in a2a_requests)
    assert {trace_hex(s) for s in captured.named("remote", "remote_risk.skill")} == {OPERATOR_TRACE}


def test_no_token_or_record_content_in_any_attribute(
    observed: tuple[Deployment, Recorder], captured: Captured
) -> None:
    deployment, recorder = observed
    delegate(deployment)
    tokens = {
        h["authorization"].partition(" ")[2] for h in recorder.headers if "authorization" in h
    }
    assert tokens, "the handoff was sent with a delegation token"
    values = [
        str(v) for v in attribute_values(captured.spans("coordinator") + captured.spans("remote"))
    ]
    secrets = {*tokens, TOKEN, "brief-001", "risk-policy-007", "refund_execution_permitted"}
    for secret in secrets:
        for value in values:
            assert secret not in value, f"{secret!r} leaked into a span attribute"
