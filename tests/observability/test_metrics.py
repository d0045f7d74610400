"""``GET /metrics`` on both services: Prometheus text that parses, behind a token, and
counters that move by the expected amounts (issue 16 item 5)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.server.app import JSONRPC_PATH
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.coordinator.test_api import PAYLOAD, SKILL, TOKEN
from tests.observability.spans import eventually
from tests.servers import free_port, running

METRICS_TOKEN = "metrics-token-for-tests-0123456789"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Pair:
    api: str
    risk: str
    http: httpx.Client

    def coordinator_metrics(self) -> Samples:
        answer = self.http.get("/metrics")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain; version=")
        return parsed(answer.text)

    def risk_metrics(self) -> Samples:
        auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        answer = httpx.get(self.risk + "/metrics", headers=auth, timeout=10)
        assert answer.status_code == 200
        return parsed(answer.text)


def parsed(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pair]:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    ws = Workspace(data)
    port = free_port()
    risk_app = create_app(
        Settings(
            public_base_url=f"http://127.0.0.1:{port}",
            trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
            metrics_token=METRICS_TOKEN,
        )
    )
    settings = CoordinatorSettings(operator_token=TOKEN, worker_lease_seconds=5.0)
    with running(risk_app, port=port) as risk, running(create_api(ws, settings)) as api:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=api, headers=headers, timeout=60, trust_env=False) as http:
            pins = risk_app.state.signing_keys.public_jwks()
            body = {"url": risk, "trust_key": pins, "return_finding": [SKILL]}
            assert http.post("/v1/agents", json=body).status_code == 200
            yield Pair(api, risk, http)
    ws.close()


def test_metrics_need_the_operator_token_and_the_metrics_token(pair: Pair) -> None:
    assert httpx.get(pair.api + "/metrics", timeout=10).status_code == 401
    assert httpx.get(pair.risk + "/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer not-the-metrics-token-000000"}
    assert httpx.get(pair.risk + "/metrics", headers=wrong, timeout=10).status_code == 401


def test_remote_risk_without_a_metrics_token_serves_no_metrics() -> None:
    port = free_port()
    with running(
        create_app(Settings(public_base_url=f"http://127.0.0.1:{port}")), port=port
    ) as url:
        auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        assert httpx.get(url + "/metrics", headers=auth, timeout=10).status_code == 404


def test_counters_move_by_what_was_done(pair: Pair) -> None:
    before, risk_before = pair.coordinator_metrics(), pair.risk_metrics()
    for _ in range(2):
        body = {"to": "remote-risk", "skill": SKILL, "input": PAYLOAD, "wait": True}
        answer = pair.http.post("/v1/delegations", json=body)
        assert answer.status_code == 200 and answer.json()["local_state"] == "ACCEPTED"
    # more context than the run may hand out (a skill typo is refused before any run)
    oversized = {**PAYLOAD, "notes": "x" * 300_000}
    unknown = {"to": "remote-risk", "skill": SKILL, "input": oversized, "wait": True}
    denied = pair.http.post("/v1/delegations", json=unknown)
    assert denied.status_code == 200 and denied.json()["local_state"] == "REJECTED", denied.text
    call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    refused = httpx.post(pair.risk + JSONRPC_PATH, json=call, headers={"A2A-Version": "1.0"})
    assert refused.status_code == 401
    # A request is counted just after its response is sent: scrape until the last ones are.
    delegations = {"method": "POST", "route": "/v1/delegations", "status": "200"}
    # The first handoff's message is streamed; once its skill answered at once, the next is
    # one blocking SendMessage (coordinator.dispatch.attempt.send_modes): sends count either way.
    sends = ("SendStreamingMessage", "SendMessage")
    http_count = "federation_http_request_duration_seconds_count"
    scraped: list[tuple[Samples, Samples]] = []

    def settled() -> bool:
        scraped.append((pair.coordinator_metrics(), pair.risk_metrics()))
        ours, theirs = scraped[-1]
        return (
            value(ours, http_count, **delegations) - value(before, http_count, **delegations) >= 3
            and sum(
                value(theirs, "remote_risk_a2a_requests_total", method=m, outcome="ok")
                - value(risk_before, "remote_risk_a2a_requests_total", method=m, outcome="ok")
                for m in sends
            )
            >= 2
        )

    eventually(settled)
    after, risk_after = scraped[-1]

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    def risk_moved(name: str, **labels: str) -> float:
        return value(risk_after, name, **labels) - value(risk_before, name, **labels)

    target = pair.risk.removeprefix("http://")
    assert moved("federation_handoffs_total", state="ACCEPTED", reason="finding_admitted") == 2
    predicate = {"predicate": "over_budget"}
    assert moved("federation_admission_denials_total", **predicate) == 1
    assert (
        moved("federation_handoffs_total", state="REJECTED", **{"reason": predicate["predicate"]})
        == 1
    )
    calls = "federation_remote_call_duration_seconds_count"
    assert sum(moved(calls, method=m, target=target, outcome="ok") for m in sends) == 2
    assert value(after, "federation_handoffs_in_flight") == 0
    assert moved("federation_ledger_events_appended_total") > 0
    assert value(after, "federation_ledger_chain_length") > value(
        before, "federation_ledger_chain_length"
    )
    assert moved("federation_http_request_duration_seconds_count", **delegations) == 3

    assert risk_moved("remote_risk_token_refusals_total", reason="token_missing") == 1
    # refused before its body was read: the method is not known (label "other")
    assert risk_moved("remote_risk_token_decisions_total", method="other", result="denied") == 1
    decisions = "remote_risk_token_decisions_total"
    assert sum(risk_moved(decisions, method=m, result="allowed") for m in sends) == 2
    requests = "remote_risk_a2a_requests_total"
    assert sum(risk_moved(requests, method=m, outcome="ok") for m in sends) == 2
    skill = {"skill": "interpret-risk-policy", "outcome": "completed"}
    assert risk_moved("remote_risk_skill_duration_seconds_count", **skill) == 2
