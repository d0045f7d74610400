"""Every demo case, run by the coordinator against a running remote_risk over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI

from agent_cards.keys import KeySet, SigningKey
from contracts.handoff import HandoffState
from coordinator.assessment.pilot import RISK_SKILL, PilotResult, run_pilot
from coordinator.assessment.scenario import PRIVATE_NOTE
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.runs import new_run, scratch_workspace
from tests.servers import free_port, running

COORDINATOR_KEYS = KeySet(active=SigningKey.generate())
REMOTE_KEYS = KeySet(active=SigningKey.generate())


@dataclass
class RiskService:
    url: str
    app: FastAPI


@pytest.fixture
def risk_service() -> Iterator[RiskService]:
    """remote_risk trusting the test coordinator's issuer key, signing its card with its own."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        record_requests=True,
        trusted_issuers={DEFAULT_ISSUER: COORDINATOR_KEYS.trusted_keys()},
        signing_keys=REMOTE_KEYS,
    )
    app = create_app(settings)
    with running(app, port=port) as url:
        yield RiskService(url, app)


def pilot(case: str, service: RiskService, tmp_path: Path, parallel: bool = False) -> PilotResult:
    async def go() -> PilotResult:
        async with A2AClient() as client:
            registration = await Registry(DataDir(tmp_path)).register(
                client,
                service.url,
                expect_skill=RISK_SKILL,
                anchor=TrustAnchor(keys=REMOTE_KEYS.trusted_keys()),
            )
            return await run_pilot(
                case,
                client,
                registration.agent,
                parallel=parallel,
                keys=COORDINATOR_KEYS,
                ws=scratch_workspace(),
            )

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("ok", "ready_for_draft"),
        ("missing", "needs_input"),
        ("failure", "failed"),
        ("conflict", "conflict"),
        ("handoff", "needs_review"),
    ],
)
@pytest.mark.parametrize("parallel", [False, True])
def test_case_outcome(
    case: str, status: str, parallel: bool, risk_service: RiskService, tmp_path: Path
) -> None:
    """Each case reaches its documented assessment, sequentially and in parallel."""
    result = pilot(case, risk_service, tmp_path, parallel)
    assert result.assessment.status.value == status
    remote = [c for c in result.consultations if c.remote]
    assert len(remote) == 1 and remote[0].record.remote_task_id


def test_ok_case_handoff_states(risk_service: RiskService, tmp_path: Path) -> None:
    """In the ok case the remote task completes and both handoffs end ACCEPTED."""
    result = pilot("ok", risk_service, tmp_path)
    assert [c.record.state for c in result.consultations] == [HandoffState.ACCEPTED] * 2
    risk = result.consultations[1]
    assert risk.record.remote_state == "TASK_STATE_COMPLETED"
    assert result.assessment.sources == ("ops-plan-001", "brief-001", "risk-policy-007")


def test_failure_case_keeps_the_remote_error_code(
    risk_service: RiskService, tmp_path: Path
) -> None:
    """The failure case ends FAILED with the remote's controlled error code, no exception text."""
    result = pilot("failure", risk_service, tmp_path)
    risk = result.consultations[1]
    assert risk.record.state is HandoffState.FAILED
    assert risk.record.remote_state == "TASK_STATE_FAILED"
    assert risk.finding is not None and risk.finding.error_code == "policy_engine_unavailable"


def test_missing_case_closes_the_interrupted_branch(
    risk_service: RiskService, tmp_path: Path
) -> None:
    """An input-required remote task is read as needs_input, then cancelled, never success."""
    result = pilot("missing", risk_service, tmp_path)
    risk = result.consultations[1]
    assert risk.finding is not None and risk.finding.status.value == "needs_input"
    assert risk.record.state is HandoffState.CANCELLED
    assert risk.record.remote_state == "TASK_STATE_CANCELED"


def test_handoff_transfers_ownership(risk_service: RiskService, tmp_path: Path) -> None:
    """The privacy case ends owned by privacy, with the former owner rejected by the run."""
    result = pilot("handoff", risk_service, tmp_path)
    assert result.run.owner == "privacy"
    assert result.former_owner_rejected is True
    assert result.clarification
    privacy = result.consultations[-1]
    assert privacy.target == "privacy" and set(privacy.sent_fields) == {"brief", "risk_finding"}


@pytest.mark.parametrize("case", ["ok", "conflict", "handoff"])
def test_private_note_never_reaches_remote_risk(
    case: str, risk_service: RiskService, tmp_path: Path
) -> None:
    """The bytes remote_risk received hold the brief and policy, never the private note."""
    pilot(case, risk_service, tmp_path)
    received = list(risk_service.app.state.received_bodies)
    assert received, "remote_risk recorded no request"
    for body in received:
        assert PRIVATE_NOTE["text"].encode() not in body
        assert b"private_note" not in body and b"operations_note" not in body
    sent = json.loads(received[0])["params"]["message"]["parts"][0]["data"]
    assert set(sent) == {"brief", "policy_note"}


def test_local_finding_citing_unsent_records_counts_as_failure() -> None:
    """A local specialist citing a record it never got is rejected, and the merge sees a failure."""
    from contracts.evidence import Finding, FindingStatus, merge
    from coordinator.assessment.pilot import run_local_handoff

    def inventive(projected: dict[str, object]) -> Finding:
        return Finding(status=FindingStatus.OK, summary="x", evidence_ids=("invented-9",))

    run = new_run(owner="coordinator")
    consultation = run_local_handoff(run, "operations", inventive, {"brief": {"id": "b1"}})
    assert consultation.record.state is HandoffState.REJECTED
    assert consultation.finding is not None
    assert merge([("operations", consultation.finding)]).status.value == "failed"


def test_a_return_held_for_review_is_missing_evidence_not_a_result() -> None:
    """A handoff that ended RETURNED_UNVERIFIED contributes no evidence to the merge: it
    is counted as missing input, never as a finding and never as success."""
    from contracts.evidence import AssessmentStatus, Finding, FindingStatus, merge
    from contracts.handoff import HandoffRecord, transition
    from coordinator.assessment.pilot import no_result

    record = HandoffRecord(
        handoff_id="h", run_id="r", source="coordinator", target="risk", skill=RISK_SKILL,
        final_owner="coordinator",
    )  # fmt: skip
    for state in ("ADMITTED", "DISPATCHED", "RETURNED", "RETURNED_UNVERIFIED"):
        record = transition(record, HandoffState(state), "held_for_review")
    missing = no_result(record)
    assert missing.status is FindingStatus.NEEDS_INPUT and "no_evidence" in missing.facts
    ops = Finding(status=FindingStatus.OK, summary="plan", evidence_ids=("ops-plan-001",))
    assessment = merge([("operations", ops), ("risk", missing)])
    assert assessment.status is not AssessmentStatus.READY_FOR_DRAFT


def test_a_streaming_agent_is_sent_one_streaming_message(
    risk_service: RiskService, tmp_path: Path
) -> None:
    """remote_risk's card says it streams, so the handoff's task, its updates and its
    artifact all come on the send's own response: one SendStreamingMessage, no separate
    subscription and no GetTask."""
    result = pilot("ok", risk_service, tmp_path)
    methods = [json.loads(body)["method"] for body in risk_service.app.state.received_bodies]
    assert methods == ["SendStreamingMessage"]
    assert result.consultations[1].record.state is HandoffState.ACCEPTED
