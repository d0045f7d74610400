"""The pilot-assessment run: consult operations (local) and risk (remote), merge, maybe hand off.

The coordinator owns the run. It reserves the whole batch of consultations before any
starts, gives each specialist only its projected context, admits what comes back, and
merges with the fixed rule in :mod:`contracts.evidence`. When the merge says a privacy
review is needed, ownership moves to the privacy specialist, and from then on the former
owner is refused by the run itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_cards.keys import KeySet
from contracts.evidence import Assessment, AssessmentStatus, Finding, FindingStatus, merge
from contracts.handoff import HandoffRecord, HandoffState, TimeoutDisposition, transition
from contracts.returns import finding_contract
from contracts.wire import Task
from coordinator.assessment import scenario, specialists
from coordinator.audit.trail import contract_of
from coordinator.authority.delegator import DEFAULT_ISSUER, Delegator, RunAuthority
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.errors import OwnershipError
from coordinator.handoff.projection import project_context, record_ids
from coordinator.handoff.run import Run, start_run
from coordinator.handoff.usage import reported_usage
from coordinator.ids import new_handoff_id
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient
from coordinator.workspace import Workspace

S = HandoffState
COORDINATOR = "coordinator"
RISK_SKILL = "interpret-risk-policy"
LocalSpecialist = Callable[[dict[str, Any]], Finding]


@dataclass
class Consultation:
    """One handoff as the operator sees it: who got what, what came back, what we decided."""

    target: str
    record: HandoffRecord
    sent_fields: tuple[str, ...]
    finding: Finding | None
    remote: bool
    admission_reason: str = ""
    grant: dict[str, object] | None = None
    # The model requests and tokens the remote reported for this handoff (modelUsage).
    remote_model: dict[str, int | None] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "handoff_id": self.record.handoff_id,
            "target": self.target,
            "remote_task_id": self.record.remote_task_id,
            "remote_state": self.record.remote_state,
            "local_state": self.record.state.value,
            "reason": self.record.reason,
            "sent_fields": list(self.sent_fields),
            "finding_status": self.finding.status.value if self.finding else None,
            "error_code": self.finding.error_code if self.finding else None,
            "admission": self.admission_reason or self.record.reason,
            "contract": self.record.return_contract.name,
            "grant": self.grant,
            "remote_model_usage": self.remote_model,
        }


@dataclass
class PilotResult:
    case: str
    run: Run
    assessment: Assessment
    consultations: list[Consultation]
    former_owner_rejected: bool | None = None
    clarification: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "run": self.run.document(),
            "run_id": self.run.run_id,
            "assessment": {
                "status": self.assessment.status.value,
                "summary": self.assessment.summary,
                "sources": list(self.assessment.sources),
                "conflicts": [c.model_dump() for c in self.assessment.conflicts],
            },
            "owner": self.run.owner,
            "ownership_path": list(self.run.ownership_path),
            "former_owner_rejected": self.former_owner_rejected,
            "handoffs": [c.as_dict() for c in self.consultations],
        }


def new_handoff(run: Run, target: str, skill: str, source: str | None = None) -> HandoffRecord:
    return HandoffRecord(
        handoff_id=new_handoff_id(),
        run_id=run.run_id,
        source=source or run.owner,
        owner_during_slice=target,
        state_ref=run.book.state_ref,
        target=target,
        skill=skill,
        final_owner=run.owner,
    )


def run_local_handoff(
    run: Run,
    target: str,
    handler: LocalSpecialist,
    projected: dict[str, Any],
    source: str | None = None,
) -> Consultation:
    """A handoff to an in-process specialist, through the same states as a remote one."""
    proposal = new_handoff(run, target, target, source).model_copy(
        update={"return_contract": finding_contract(record_ids(projected))}
    )
    record = transition(proposal, S.ADMITTED, "admitted")
    record = transition(record, S.DISPATCHED, "called_in_process")
    try:
        finding = handler(projected)
    except Exception:  # a specialist's failure is a result, never a crash of the run
        record = transition(record, S.FAILED, "specialist_error")
        _audit_local(run, record, projected)
        failed = Finding(
            status=FindingStatus.FAILED, summary="Specialist failed.", error_code="local_error"
        )
        return Consultation(target, run.record(record), tuple(projected), failed, remote=False)
    record = transition(record, S.RETURNED, "returned")
    unknown = set(finding.evidence_ids) - record_ids(projected)
    if unknown:
        record = transition(record, S.REJECTED, "unknown_evidence")
        _audit_local(run, record, projected)
        rejected = Finding(
            status=FindingStatus.FAILED,
            summary=f"The finding of {target} cited records it was never given.",
            error_code="unknown_evidence",
        )
        return Consultation(target, run.record(record), tuple(projected), rejected, remote=False)
    record = transition(record, S.ACCEPTED, "finding_admitted")
    _audit_local(run, record, projected)
    return Consultation(target, run.record(record), tuple(projected), finding, remote=False)


def _audit_local(run: Run, record: HandoffRecord, projected: dict[str, Any]) -> None:
    run.emit(
        "handoff.local",
        record,
        contract=contract_of(record),
        state=record.state.value,
        reason=record.reason,
        fields=sorted(projected),
    )


def no_result(record: HandoffRecord) -> Finding:
    """What a consultation that produced no admissible finding contributes to the merge.

    A lease that ran out under the ``continue_without_evidence`` disposition, and a return
    held for review (no contract could judge it), are explicit no-evidence results (what
    was asked, why it stopped), which the merge treats as missing input; anything else is a
    failure of the consultation, never evidence.
    """
    if record.state is HandoffState.RETURNED_UNVERIFIED or (
        record.state is HandoffState.TIMED_OUT
        and record.on_timeout is TimeoutDisposition.CONTINUE_WITHOUT_EVIDENCE
    ):
        return Finding(
            status=FindingStatus.NEEDS_INPUT,
            summary=f"No evidence from {record.target}: "
            + (
                "what it returned is held for review, not admitted."
                if record.state is HandoffState.RETURNED_UNVERIFIED
                else "its lease ended before a result."
            ),
            facts={
                "no_evidence": {
                    "asked": record.task_slice,
                    "stopped": record.reason,
                    "lease_expires_at": str(record.lease_expires_at),
                }
            },
        )
    return Finding(
        status=FindingStatus.FAILED,
        summary=f"No admissible result from {record.target}.",
        error_code=record.reason,
    )


async def consult_risk(
    run: Run,
    client: A2AClient,
    risk: RegisteredAgent,
    projected: dict[str, Any],
    wait: WaitPolicy,
    delegator: Delegator | None,
) -> Consultation:
    contract = finding_contract(record_ids(projected))
    proposal = propose(run, risk, RISK_SKILL, projected, wait, contract=contract)
    outcome: RemoteOutcome = await run_remote_handoff(
        client,
        risk,
        proposal,
        projected,
        run=run,
        wait=wait,
        delegator=delegator,
    )
    finding = outcome.finding or no_result(outcome.record)
    reason = outcome.admission.reason if outcome.admission else outcome.record.reason
    return Consultation(
        risk.name,
        outcome.record,
        outcome.sent_fields,
        finding,
        True,
        reason,
        outcome.grant,
        remote_model_usage(outcome.task),
    )


def remote_model_usage(task: Task | None) -> dict[str, int | None] | None:
    """The model usage a remote reported with its outcome (``modelUsage``; see
    :mod:`coordinator.handoff.usage`), if it is well-formed; untrusted, only counted."""
    usage = reported_usage(task)
    return (
        None if usage is None else {"requests": usage.requests, "total_tokens": usage.total_tokens}
    )


async def run_pilot(
    case: str,
    client: A2AClient,
    risk: RegisteredAgent,
    *,
    parallel: bool = False,
    wait: WaitPolicy | None = None,
    keys: KeySet | None = None,
    authority: RunAuthority | None = None,
    issuer: str = DEFAULT_ISSUER,
    ws: Workspace,
) -> PilotResult:
    """Run one case. With ``keys``, every remote handoff carries a narrowed delegation token
    minted from the run's root grant (``authority``); without, none is sent."""
    context = scenario.context_for(case)
    run = start_run(ws, COORDINATOR, authority=authority)
    delegator = None
    if keys is not None:
        expires_at = int(run.book.parent.expires_at.timestamp())
        delegator = Delegator(keys, run.authority, issuer, run.run_id, expires_at, run.owner)
    run.reserve_delegations(COORDINATOR, 2)
    ops_view = project_context(context, scenario.CONTEXT_KEYS["operations"])
    risk_view = project_context(context, scenario.CONTEXT_KEYS["risk"])

    async def ask_operations() -> Consultation:
        return run_local_handoff(run, "operations", specialists.operations, ops_view)

    ask_risk = consult_risk(run, client, risk, risk_view, wait or WaitPolicy(), delegator)
    if parallel:
        operations, risk_result = await asyncio.gather(ask_operations(), ask_risk)
    else:
        operations = await ask_operations()
        risk_result = await ask_risk
    consultations = [operations, risk_result]
    # Every consultation counts: one without an admissible finding carries a failed one.
    assessment = merge([(c.target, c.finding or no_result(c.record)) for c in consultations])
    result = PilotResult(case, run, assessment, consultations)
    if assessment.status is AssessmentStatus.NEEDS_REVIEW:
        hand_off_to_privacy(result, context, risk_result)
    record_disposition(result)
    return result


def record_disposition(result: PilotResult) -> None:
    result.run.emit(
        "run.disposition",
        case=result.case,
        status=result.assessment.status.value,
        summary=result.assessment.summary,
        sources=list(result.assessment.sources),
        conflicts=[c.model_dump() for c in result.assessment.conflicts],
        owner=result.run.owner,
        former_owner_rejected=result.former_owner_rejected,
    )
    result.run.trail.flush()


def hand_off_to_privacy(
    result: PilotResult, context: dict[str, Any], risk_result: Consultation
) -> None:
    run = result.run
    handover = project_context(context, scenario.CONTEXT_KEYS["privacy"])
    risk_finding = risk_result.finding
    if risk_finding is not None:
        handover["risk_finding"] = {
            "id": f"finding:{risk_result.record.handoff_id}",
            "facts": risk_finding.facts,
            "evidence_ids": list(risk_finding.evidence_ids),
        }
    run.transfer_ownership(COORDINATOR, "privacy")
    try:
        run.check_owner(COORDINATOR)  # the former owner tries to finish the reply itself
        result.former_owner_rejected = False
    except OwnershipError:
        result.former_owner_rejected = True
    privacy = run_local_handoff(run, "privacy", specialists.privacy, handover, COORDINATOR)
    result.consultations.append(privacy)
    if privacy.finding is not None:
        result.clarification = str(privacy.finding.facts.get("clarification_question", ""))
