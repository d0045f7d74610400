"""remote_risk's token check before the body and its model-backed skill each have a span,
and a handoff the worker drives hangs under the span its run started in (issue 16).

remote_risk runs on loopback with a model (the adversarial server, answering one good
Finding); a caller sends as the coordinator does. The coordinator's API runs with its
worker; a delegation submitted without waiting is driven by it later, outside the
request's span.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.storage.datadir import DataDir
from tests import tokens
from tests.adversarial_model import AdversarialModel, adversarial_model, answer_reply
from tests.coordinator.test_api import Deployment, deployed
from tests.model_server import PLACEHOLDER_KEY
from tests.observability.spans import (
    Captured,
    attribute_values,
    eventually,
    parent_hex,
    span_hex,
    trace_hex,
)
from tests.remote_risk.delegated import ISSUER, SCOPE, Caller, delegated_service, refusal_reason

FINDING = {
    "status": "ok",
    "summary": "Policy risk-policy-007 does not permit refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidence_ids": ["risk-policy-007", "brief-001"],
}


@pytest.fixture
def model() -> Iterator[AdversarialModel]:
    with adversarial_model([answer_reply(json.dumps(FINDING))]) as server:
        yield server


@pytest.fixture
def caller(model: AdversarialModel) -> Iterator[Caller]:
    with delegated_service(model=model.risk_config(10.0)) as (caller, _):
        yield caller


def token(caller: Caller, handoff_id: str, **budget: Any) -> str:
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=SCOPE,
        handoff_id=handoff_id,
        jti=f"jti-{handoff_id}",
    )
    return tokens.forge(tokens.header(), tokens.with_budget(claims, **budget))


def test_the_token_check_before_the_body_and_the_model_skill_have_spans(
    caller: Caller, model: AdversarialModel, captured: Captured
) -> None:
    bounded = token(caller, "handoff-1", model_requests=1)
    response = caller.send("run-1", "handoff-1", token=bounded)
    task = caller.task_of(response)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    eventually(lambda: bool(captured.named("remote", "remote_risk.skill")))

    (checked,) = captured.named("remote", "remote_risk.authenticate_token")
    (server,) = captured.named("remote", "POST /a2a/jsonrpc")
    assert parent_hex(checked) == span_hex(server)
    assert (checked.attributes or {})["remote_risk.token.verdict"] == "allowed"

    (skill,) = captured.named("remote", "remote_risk.skill")
    attributes = dict(skill.attributes or {})
    assert trace_hex(skill) == trace_hex(server)
    assert attributes["remote_risk.skill.model"] is True
    assert attributes["remote_risk.model.budget"] == 1
    assert attributes["remote_risk.model.requests"] == 1
    assert attributes["remote_risk.task_state"] == "TASK_STATE_COMPLETED"

    values = [str(v) for v in attribute_values(captured.spans("remote"))]
    for secret in (bounded, PLACEHOLDER_KEY, "brief-001", "risk-policy-007", "refund_execution"):
        assert not any(secret in value for value in values), f"{secret!r} in a span attribute"


def test_a_refusal_before_the_body_names_its_reason_on_the_span(
    caller: Caller, model: AdversarialModel, captured: Captured
) -> None:
    unbounded = token(caller, "handoff-2")
    refused = caller.send("run-1", "handoff-2", token=unbounded)
    assert refusal_reason(refused) == (403, "model_budget_unbounded")
    eventually(lambda: bool(captured.named("remote", "remote_risk.authenticate_token")))
    (checked,) = captured.named("remote", "remote_risk.authenticate_token")
    attributes = dict(checked.attributes or {})
    assert attributes["remote_risk.token.verdict"] == "denied"
    assert attributes["remote_risk.denial_reason"] == "model_budget_unbounded"
    assert captured.named("remote", "remote_risk.skill") == []
    assert model.requests == []


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployed_pair:
        assert deployed_pair.register().status_code == 200
        yield deployed_pair


def test_the_workers_handoff_hangs_under_the_span_its_run_started_in(
    deployment: Deployment, captured: Captured
) -> None:
    """Submitted without waiting: the worker's handoff span is a child of (and links to)
    the API request span the run started in, a span the trace really holds."""
    answer = deployment.delegate(wait=False)
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    deadline = time.monotonic() + 30
    while deployment.http.get(f"/v1/runs/{run_id}").json().get("live_branches"):
        assert time.monotonic() < deadline, "the worker never finished the handoff"
        time.sleep(0.05)
    document = deployment.http.get(f"/v1/runs/{run_id}").json()
    eventually(lambda: bool(captured.named("coordinator", "federation.handoff")))

    (handoff,) = captured.named("coordinator", "federation.handoff")
    started_in = [s for s in captured.spans("coordinator") if span_hex(s) == document["span_id"]]
    assert [s.name for s in started_in] == ["POST /v1/delegations"]
    assert trace_hex(handoff) == document["trace_id"] == trace_hex(started_in[0])
    assert parent_hex(handoff) == document["span_id"]
    linked = [format(link.context.span_id, "016x") for link in handoff.links]
    assert linked == [document["span_id"]]
