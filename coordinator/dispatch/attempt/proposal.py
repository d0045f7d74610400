"""A handoff before it is sent: its full contract, the admission context, the message.

:func:`propose` writes down everything a handoff is (who gives what to whom, under which
scope, budget, lease, return contract and duplicate key) before anything is admitted or
sent; :func:`build_message` is the A2A message that carries it, bound to the handoff
attempt and keyed so that a retried send is recognisable as the same work.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from contracts import strict_json
from contracts.handoff import HandoffBudget, HandoffRecord, TimeoutDisposition
from contracts.returns import ReturnContract, ReturnContractKind
from contracts.wire import Message, Part, Role
from coordinator.authority.delegator import required_scopes
from coordinator.handoff.admission import AdmissionContext
from coordinator.handoff.projection import record_ids
from coordinator.handoff.run import Run
from coordinator.ids import new_handoff_id, new_message_id
from coordinator.remote.cards.registered_agent import RegisteredAgent

COMPLETE_WHEN = "the remote task completed with an artifact"
RETURN_WHEN = "the artifact passes return admission under the handoff's return contract"
# The most of the run's model requests one handoff reserves (what it leaves unused is
# released when it ends): room for a remote's request and one retry of it.
MODEL_REQUESTS_PER_HANDOFF = 2


@dataclass(frozen=True)
class WaitPolicy:
    """How long a handoff may take, and how often the remote task is polled meanwhile."""

    deadline_seconds: float = 30.0
    first_poll: float = 0.05
    max_poll: float = 1.0
    # Attempts of one handoff in all, retried with backoff (dispatch/retry.py) while the
    # lease lasts: a remote that is down at the send and back before the deadline is
    # reached on a later attempt, under the same idempotency key.
    max_attempts: int = 20


def propose(
    run: Run,
    agent: RegisteredAgent,
    skill: str,
    payload: dict[str, Any],
    wait: WaitPolicy,
    *,
    on_timeout: TimeoutDisposition = TimeoutDisposition.CONTINUE_WITHOUT_EVIDENCE,
    handoff_id: str | None = None,
    attempt: int = 1,
    contract: ReturnContract | None = None,
) -> HandoffRecord:
    """The full handoff contract for sending ``payload`` to ``agent``'s ``skill``.

    Its return contract is ``contract``, else the one declared for the skill at
    registration, else the default that admits nothing; the handoff binding is checked
    whenever the target's card declares our delegation scheme."""
    book = run.book
    now = book.clock()
    lease = min(now + timedelta(seconds=wait.deadline_seconds), book.parent.expires_at)
    encoded = strict_json.dumps(payload)
    scopes = required_scopes(agent.agent_card, skill)
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    return HandoffRecord(
        handoff_id=handoff_id or new_handoff_id(),
        run_id=run.run_id,
        source=run.owner,
        target=agent.name,
        skill=skill,
        final_owner=run.owner,
        task_slice=f"{skill} over {', '.join(sorted(payload))}",
        owner_during_slice=agent.name,
        state_ref=book.state_ref,
        capabilities=(skill,),
        scope=tuple(sorted(scopes)) if scopes else tuple(sorted(run.authority.scopes)),
        tenant=run.authority.tenant,
        delegation_expires_at=lease,
        budget=_envelope(run, len(encoded)),
        complete_when=COMPLETE_WHEN,
        return_when=RETURN_WHEN,
        cancel_ref=book.cancel_ref,
        lease_expires_at=lease,
        on_timeout=on_timeout,
        duplicate_key=f"{agent.name}:{skill}:v{book.state_version}:{digest}",
        attempt=attempt,
        return_contract=_contract_for(agent, skill, payload, contract, scopes is not None),
    )


def _envelope(run: Run, context_units: int) -> HandoffBudget:
    """One action, the payload's size, no effects, and a share of the model budget the run
    has left (its model requests and tokens, when the run names them)."""
    left = run.book.remaining()
    requests = left.model_requests
    return HandoffBudget(
        actions=1,
        context_units=context_units,
        effects=0,
        model_requests=None
        if requests is None
        else max(0, min(MODEL_REQUESTS_PER_HANDOFF, requests)),
        model_tokens=None if left.model_tokens is None else max(0, left.model_tokens),
    )


def _contract_for(
    agent: RegisteredAgent,
    skill: str,
    payload: dict[str, Any],
    given: ReturnContract | None,
    delegation_scheme: bool,
) -> ReturnContract:
    """``given``, else the skill's declared contract, else the default; a Finding contract
    that names no records cites among the records in ``payload``."""
    contract = (given or agent.return_contract_for(skill)).binding_required(delegation_scheme)
    if contract.kind is ReturnContractKind.FINDING and not contract.sent_record_ids:
        contract = contract.model_copy(
            update={"sent_record_ids": tuple(sorted(record_ids(payload)))}
        )
    return contract


def admission_context(run: Run, agent: RegisteredAgent) -> AdmissionContext:
    skills = frozenset(agent.skill_ids())
    # Every delegation this coordinator makes is read-only: no skill may receive effects.
    return AdmissionContext(
        participants=frozenset({run.owner}),
        target_capabilities={agent.name: skills},
        read_only_skills=skills,
        current_state_version=run.book.state_version,
    )


def idempotency_key(record: HandoffRecord) -> str:
    return f"{record.run_id}:{record.handoff_id}"


def build_message(record: HandoffRecord, payload: dict[str, Any]) -> Message:
    return Message(
        message_id=new_message_id(),
        role=Role.USER,
        parts=[Part(data=payload, media_type="application/json")],
        metadata={
            "handoffId": record.handoff_id,
            "attempt": record.attempt,
            "skillId": record.skill,
            "stateVersion": record.state_ref.version if record.state_ref else 0,
            # One logical handoff, one key: a retried send is recognisable as the same work.
            "idempotencyKey": idempotency_key(record),
        },
    )
