"""One model budget across the federation: the grant carries the remote's share of it.

A real coordinator hands off to a real remote_risk whose model (the adversarial server)
first answers with a broken body, so the remote would ask a second time (its cap is two
requests per task). The run's authority leaves the handoff one model request or two; the
remote spends no more than its grant, ends ``model_budget_exhausted`` when the grant is
spent, and the run's budget ledger counts what the remote reported, so the run
document's totals are what the model server received.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_cards.identity import identity_of
from contracts.grant import Budget
from contracts.handoff import HandoffState
from coordinator.authority.delegator import (
    DEFAULT_ISSUER,
    DEFAULT_MODEL_REQUESTS,
    RunAuthority,
    authority_document,
    authority_from,
)
from coordinator.dispatch.attempt.driver import RemoteOutcome
from coordinator.handoff.run import Run
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests import tokens
from tests.adversarial_model import AdversarialModel, adversarial_model, answer_reply, broken_json
from tests.coordinator.test_leases_and_cancel import (
    COORDINATOR_KEYS,
    REMOTE_KEYS,
    one_handoff,
    registered,
)
from tests.remote_risk.delegated import ISSUER, Caller, refusal_reason
from tests.runs import new_run
from tests.servers import free_port, running

FINDING = {
    "status": "ok",
    "summary": "Policy risk-policy-007 does not permit refund execution.",
    "facts": {"refund_execution_permitted": False, "privacy_review_required": False},
    "evidence_ids": ["risk-policy-007", "brief-001"],
}


@pytest.fixture
def model() -> Iterator[AdversarialModel]:
    with adversarial_model([broken_json(), answer_reply(json.dumps(FINDING))]) as server:
        yield server


@pytest.fixture
def risk(model: AdversarialModel) -> Iterator[str]:
    """remote_risk with a model, asking it up to twice per task (one retry of a bad reply)."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: COORDINATOR_KEYS.trusted_keys()},
        signing_keys=REMOTE_KEYS,
        model=model.risk_config(10.0, requests_per_task=2),
    )
    with running(create_app(settings), port=port) as url:
        yield url


def run_with(model_requests: int | None) -> Run:
    spend = Budget(actions=8, context_units=256_000, effects=0, model_requests=model_requests)
    return new_run(authority=RunAuthority(budget=spend))


def hand_off(url: str, run: Run, tmp_path: Path) -> RemoteOutcome:
    async def go() -> RemoteOutcome:
        async with A2AClient() as client:
            agent = await registered(client, url, DataDir(tmp_path))
            return await one_handoff(client, agent, run, 20.0)

    return asyncio.run(go())


def test_a_grant_of_one_model_request_stops_a_remote_that_would_make_two(
    risk: str, model: AdversarialModel, tmp_path: Path
) -> None:
    """Budget 1: the remote's first reply is broken, its retry is never sent; the task
    ends model_budget_exhausted and the run's ledger counts the one remote request."""
    run = run_with(1)
    outcome = hand_off(risk, run, tmp_path)
    assert len(model.requests) == 1
    assert outcome.record.state is HandoffState.FAILED, outcome.record.reason
    assert outcome.record.reason == "remote_failed:model_budget_exhausted"
    assert outcome.finding is not None and outcome.finding.error_code == "model_budget_exhausted"
    totals = run.document()["budget"]
    assert totals["model"] == {"requests": 1, "remote_requests": 1, "total_tokens": None}
    assert totals["remaining"]["model_requests"] == 0


def test_the_run_document_counts_every_request_the_remote_made(
    risk: str, model: AdversarialModel, tmp_path: Path
) -> None:
    """Budget 8: the handoff's share is 2; both requests are made and both are counted,
    in the run's document and in the budget ledger its store keeps."""
    run = run_with(8)
    outcome = hand_off(risk, run, tmp_path)
    assert outcome.record.state is HandoffState.ACCEPTED, outcome.record.reason
    assert len(model.requests) == 2
    document = run.document()
    assert document["budget"]["model"]["requests"] == 2
    assert document["budget"]["model"]["remote_requests"] == 2
    assert document["budget"]["remaining"]["model_requests"] == 6
    stored = run.store.rows("budget_units", run.run_id)
    consumed = [row for row in stored if row["kind"] == "consumed"]
    assert [row["model_requests"] for row in consumed] == [2]
    reserved = [row for row in stored if row["kind"] == "reserved"]
    assert [row["model_requests"] for row in reserved] == [2]


def test_a_run_without_model_requests_left_sends_the_remote_none(
    risk: str, model: AdversarialModel, tmp_path: Path
) -> None:
    """Budget 0: the grant carries 0, so remote_risk asks its model nothing."""
    outcome = hand_off(risk, run_with(0), tmp_path)
    assert model.requests == []
    assert outcome.record.reason == "remote_failed:model_budget_exhausted"


def test_a_token_whose_model_budget_is_unbounded_is_refused(risk: str) -> None:
    """A run naming no model limit mints tokens without one: remote_risk, which spends
    model requests, refuses them (a missing limit counts as wider), before any body."""
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=identity_of(REMOTE_KEYS.active.verification_key()),
        scope="risk:interpret",
    )
    caller = Caller(risk, claims["aud"])
    unbounded = _minted(claims)
    assert refusal_reason(caller.send("run-1", "handoff-7", token=unbounded)) == (
        403,
        "model_budget_unbounded",
    )
    widened = _minted(
        {**claims, "handoff": {**claims["handoff"], "budget": {"model_requests": "2"}}}
    )
    status, _ = refusal_reason(caller.send("run-1", "handoff-7", token=widened))
    assert status == 401
    bounded = _minted(tokens.with_budget(claims, model_requests=1))
    response = caller.send("run-1", "handoff-7", token=bounded)
    assert response.status_code == 200 and "error" not in response.json()


def _minted(claims: dict[str, Any]) -> str:
    key = COORDINATOR_KEYS.signing_key()
    return tokens.forge(tokens.header(key), claims, key=key.private_key)


def test_the_refusal_reaches_the_coordinator_as_a_failed_dispatch(
    risk: str, model: AdversarialModel, tmp_path: Path
) -> None:
    """A run naming no model limit: its handoff is refused by the remote (403, the
    refusal's text in the notes), and the model is asked nothing."""
    outcome = hand_off(risk, run_with(None), tmp_path)
    assert model.requests == []
    assert outcome.record.reason == "dispatch_failed:model_budget_unbounded"
    assert any("names no model_requests" in note for note in outcome.notes), outcome.notes


def test_a_run_stored_before_model_limits_gets_the_default_one() -> None:
    """Recovering a run whose stored authority names no model limit bounds its grants
    with the default (narrower than none); an explicit null stays unlimited."""
    stored = authority_document(RunAuthority())
    stored["budget"] = {"actions": 8, "context_units": 256_000, "effects": 0}
    assert authority_from(stored).budget.model_requests == DEFAULT_MODEL_REQUESTS
    stored["budget"]["model_requests"] = None
    assert authority_from(stored).budget.model_requests is None
