"""The path of one remote handoff: propose, admit, mint, dispatch, wait, admit the return.

Every step commits to the run's :class:`~coordinator.handoff.book.HandoffBook`, guarded by
the version it was based on; the remote task's state is translated by
:mod:`coordinator.handoff.state_map` and never copied. The coordinator never waits forever: the
handoff has an absolute lease, and at its end the handoff is TIMED_OUT and the remote
task is sent ``CancelTask`` as a best effort. If the run is cancelled meanwhile, the
cancel wins by revision and whatever arrives later is recorded as late.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from contracts import strict_json
from contracts.evidence import Finding
from contracts.grant import Budget
from contracts.handoff import (
    HandoffBudget,
    HandoffRecord,
    HandoffState,
    TimeoutDisposition,
)
from contracts.returns import ReturnContract, ReturnContractKind
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from coordinator.authority.delegator import Delegator, GrantRefused, required_scopes
from coordinator.dispatch.faults import pause_point
from coordinator.errors import FederationError
from coordinator.handoff.admission import AdmissionContext, AdmissionDenied
from coordinator.handoff.book import ArtifactDecision, RunCancelled, StaleRevision
from coordinator.handoff.projection import record_ids
from coordinator.handoff.returns import (
    Admission,
    admit_interruption,
    admit_task,
    failure_admission,
)
from coordinator.handoff.run import Run
from coordinator.handoff.state_map import local_view
from coordinator.remote.client import A2AClient
from coordinator.remote.registry import RegisteredAgent
from coordinator.remote.streaming import PollBackoff, RemoteUpdates, updates_for

S = HandoffState
# Failures after which sending again can help: the message may never have arrived, or a
# proxy answered instead of the agent (a body that is not JSON-RPC, or not JSON at all).
# A remote's refusal, an A2A error or an answer that fails admission is never retried.
RETRYABLE = frozenset({"unreachable", "timeout", "transport_error", "not_jsonrpc", "not_json"})
COMPLETE_WHEN = "the remote task completed with an artifact"
RETURN_WHEN = "the artifact passes return admission under the handoff's return contract"


@dataclass(frozen=True)
class WaitPolicy:
    """How long a handoff may take, and how often the remote task is polled meanwhile."""

    deadline_seconds: float = 30.0
    first_poll: float = 0.05
    max_poll: float = 1.0
    max_attempts: int = 2


@dataclass
class RemoteOutcome:
    record: HandoffRecord
    task: Task | None = None
    admission: Admission | None = None
    decision: ArtifactDecision | None = None
    sent_fields: tuple[str, ...] = ()
    grant: dict[str, object] | None = None
    notes: list[str] = field(default_factory=list)
    lease_renewed_at: float = field(default_factory=time.monotonic)

    @property
    def finding(self) -> Finding | None:
        """The admitted finding, or the remote's own failed finding (for its error code)."""
        if self.admission is None:
            return None
        if self.decision is ArtifactDecision.ADMITTED or self.record.state is S.FAILED:
            return self.admission.finding
        return None


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
        handoff_id=handoff_id or f"ho-{uuid.uuid4().hex[:12]}",
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
        budget=HandoffBudget(actions=1, context_units=len(encoded), effects=0),
        complete_when=COMPLETE_WHEN,
        return_when=RETURN_WHEN,
        cancel_ref=book.cancel_ref,
        lease_expires_at=lease,
        on_timeout=on_timeout,
        duplicate_key=f"{agent.name}:{skill}:v{book.state_version}:{digest}",
        attempt=attempt,
        return_contract=_contract_for(agent, skill, payload, contract, scopes is not None),
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
        message_id=f"msg-{uuid.uuid4().hex}",
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


def _mint(
    outcome: RemoteOutcome, run: Run, agent: RegisteredAgent, delegator: Delegator | None
) -> dict[str, str]:
    """Mint the handoff's narrowed token when the target takes delegation tokens."""
    record = outcome.record
    scopes = required_scopes(agent.agent_card, record.skill)
    if scopes is None:
        outcome.notes.append("target declares no bearer-token scheme: no delegation token sent")
        return {}
    if delegator is None:
        raise GrantRefused("authority", "this run holds no authority to delegate")
    left = run.book.remaining()
    own = record.budget or HandoffBudget(actions=0, context_units=0, effects=0)
    before = Budget(
        actions=left.actions + own.actions,
        context_units=left.context_units + own.context_units,
        effects=left.effects + own.effects,
    )
    minted = delegator.mint(record, agent.endpoint, scopes, remaining=before)
    outcome.grant = minted.summary()
    run.emit("grant.minted", record, **minted.summary())
    if run.store is not None:
        run.store.add(
            "grants",
            {
                "jti": minted.grant.jti,
                "run_id": run.run_id,
                "attempt_id": record.attempt_id,
                "claims_digest": minted.digest,
                "scope": minted.grant.scope,
                "aud": minted.grant.aud,
                "exp": minted.grant.exp,
            },
        )
    return {"Authorization": f"Bearer {minted.token}"}


async def run_remote_handoff(
    client: A2AClient,
    agent: RegisteredAgent,
    proposal: HandoffRecord,
    payload: dict[str, Any],
    *,
    run: Run,
    wait: WaitPolicy | None = None,
    delegator: Delegator | None = None,
) -> RemoteOutcome:
    """Admit ``proposal`` (nothing is sent if it fails), record what will be sent, drive it.

    A transport failure is retried as the same logical handoff with the next attempt
    number, within the same lease and the run's budget; the idempotency key stays the
    same, so a remote that did get the first send hands back the task it already has.
    """
    wait = wait or WaitPolicy()
    notes: list[str] = []
    while True:
        outcome = await _attempt(
            client,
            agent,
            proposal,
            payload,
            run=run,
            wait=wait,
            delegator=delegator,
        )
        outcome.notes[:0] = notes
        record = outcome.record
        if not _retryable(record, wait) or run.book.cancelled or _lease_left(outcome, run) <= 0:
            return outcome
        notes = [*outcome.notes, f"attempt {record.attempt} failed ({record.reason}); retrying"]
        proposal = _next_attempt(proposal, record)


def _retryable(record: HandoffRecord, wait: WaitPolicy) -> bool:
    reason = record.reason.removeprefix("dispatch_failed:")
    return (
        record.state is S.FAILED
        and record.reason.startswith("dispatch_failed:")
        and reason in RETRYABLE
        and record.attempt < wait.max_attempts
    )


def _next_attempt(proposal: HandoffRecord, failed: HandoffRecord) -> HandoffRecord:
    return proposal.model_copy(update={"attempt": failed.attempt + 1})


async def _attempt(
    client: A2AClient,
    agent: RegisteredAgent,
    proposal: HandoffRecord,
    payload: dict[str, Any],
    *,
    run: Run,
    wait: WaitPolicy,
    delegator: Delegator | None,
) -> RemoteOutcome:
    outcome = RemoteOutcome(record=proposal, sent_fields=tuple(payload))
    try:
        outcome.record = run.book.admit(proposal, admission_context(run, agent))
    except (AdmissionDenied, RunCancelled) as exc:
        outcome.record = run.book.records.get(proposal.attempt_id, proposal)
        outcome.notes.append(str(exc))
        run.record(outcome.record)
        return outcome
    if run.store is not None:
        contract = outcome.record.return_contract.kind.value
        run.store.save_payload(outcome.record, payload, contract)
    await drive(
        client,
        agent,
        outcome,
        payload,
        run=run,
        wait=wait,
        delegator=delegator,
    )
    return outcome


async def drive(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    payload: dict[str, Any],
    *,
    run: Run,
    wait: WaitPolicy,
    delegator: Delegator | None,
) -> None:
    """Take an admitted handoff from wherever it stands to a terminal state (see
    :func:`_drive_steps`); whatever it recorded is in the ledger when it returns."""
    try:
        await _drive_steps(
            client,
            agent,
            outcome,
            payload,
            run=run,
            wait=wait,
            delegator=delegator,
        )
    finally:
        run.trail.flush()


async def _drive_steps(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    payload: dict[str, Any],
    *,
    run: Run,
    wait: WaitPolicy,
    delegator: Delegator | None,
) -> None:
    """Take an admitted handoff from wherever it stands to a terminal state.

    This is also how a restarted coordinator continues: an ADMITTED handoff was never
    sent; a DISPATCHED one without a remote task id may or may not have arrived, so it is
    sent again under the same idempotency key (the remote returns the task it already
    has); one with a task id is observed with GetTask; a RETURNED one is judged again.
    Every call carries a token minted for this handoff attempt.
    """
    try:
        headers = _mint(outcome, run, agent, delegator)
    except GrantRefused as exc:
        _commit(outcome, run, S.FAILED, exc.reason)
        outcome.notes.append(str(exc))
        run.record(outcome.record)
        return
    run.credentials[outcome.record.attempt_id] = headers
    task: Task | None
    if outcome.record.state is S.ADMITTED:
        run.trail.flush()  # the admitted handoff and what it will send are durable first
        pause_point("before_dispatch")
        # The dispatch is recorded before the message leaves, so a crash mid-send is visible.
        outcome.record = run.book.commit(outcome.record, S.DISPATCHED, "message_sending")
    if outcome.record.remote_task_id is None:
        run.emit(
            "message.dispatched",
            outcome.record,
            endpoint=agent.endpoint,
            idempotency_key=idempotency_key(outcome.record),
            with_token=bool(headers),
        )
        task, stream = await _send(client, agent, outcome, payload, headers, run, wait)
    else:
        run.trail.flush()
        task, stream = await _fetch_task(client, agent, outcome, headers), None
    if task is not None and outcome.record.state is S.RETURNED:
        _judge(outcome, run, task)
    elif task is not None:
        await _follow(client, agent, outcome, task, run, wait, headers, stream)
    elif outcome.record.live and _lease_left(outcome, run) <= 0:
        _commit(outcome, run, S.TIMED_OUT, "lease_expired")
    run.record(outcome.record)


async def _fetch_task(
    client: A2AClient, agent: RegisteredAgent, outcome: RemoteOutcome, headers: dict[str, str]
) -> Task | None:
    task_id = outcome.record.remote_task_id or ""
    try:
        return await client.get_task(agent.endpoint, GetTaskRequest(id=task_id), headers)
    except FederationError as exc:
        outcome.notes.append(f"could not read remote task {task_id}: {exc}")
        return None


def _lease_left(outcome: RemoteOutcome, run: Run) -> float:
    lease = outcome.record.lease_expires_at
    assert lease is not None
    return (lease - run.book.clock()).total_seconds()


async def _send(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    payload: dict[str, Any],
    headers: dict[str, str],
    run: Run,
    wait: WaitPolicy,
) -> tuple[Task | None, RemoteUpdates | None]:
    """Send the message; the task it opened, and its update stream if one is open.

    An agent whose card says it streams gets ``SendStreamingMessage`` (while the client
    has a stream slot free): the task and then its updates arrive on one response, which
    is handed on as the handoff's update source. Otherwise ``SendMessage`` with
    ``returnImmediately``, and the task is followed by polling."""
    run.trail.flush()
    request = SendMessageRequest(
        message=build_message(outcome.record, payload),
        configuration=SendMessageConfiguration(
            accepted_output_modes=["application/json"], return_immediately=True
        ),
    )
    stream: RemoteUpdates | None = None
    try:
        async with asyncio.timeout(max(0.001, _lease_left(outcome, run))):
            if agent.agent_card.capabilities.streaming and client.open_stream_slot():
                backoff = PollBackoff(wait.first_poll, wait.max_poll)
                task, stream = await _open_stream(
                    client, agent.endpoint, request, headers, backoff, outcome.notes
                )
            else:
                task = (await client.send_message(agent.endpoint, request, headers)).task
    except TimeoutError:
        _commit(outcome, run, S.TIMED_OUT, "lease_expired_during_dispatch")
        return None, None
    except FederationError as exc:
        _commit(outcome, run, S.FAILED, f"dispatch_failed:{exc.reason}")
        outcome.notes.append(str(exc))
        return None, None
    if task is None:
        _commit(outcome, run, S.FAILED, "remote_replied_without_task")
        return None, None
    pause_point("after_dispatch")
    try:
        outcome.record = run.book.note(
            outcome.record, remote_task_id=task.id, remote_state=task.status.state.value
        )
    except StaleRevision:
        outcome.record = run.book.current(outcome.record)
    return task, stream


async def _open_stream(
    client: A2AClient,
    endpoint: str,
    request: SendMessageRequest,
    headers: dict[str, str],
    backoff: PollBackoff,
    notes: list[str],
) -> tuple[Task | None, RemoteUpdates | None]:
    """``SendStreamingMessage`` holding one of the client's stream slots: the first event
    must be the task; the rest of the stream follows it. The slot is released when the
    stream is closed, or at once if no task came."""
    events = client.stream_message(endpoint, request, headers)
    try:
        first = await anext(events)
    except BaseException:
        await events.aclose()
        client.close_stream_slot()
        raise
    if first.task is None:
        await events.aclose()
        client.close_stream_slot()
        return None, None
    updates = RemoteUpdates(
        client,
        endpoint,
        first.task,
        headers,
        source=lambda: events,
        backoff=backoff,
        notes=notes,
        on_release=client.close_stream_slot,
        confirm_settled=False,
    )
    return first.task, updates


def _hold_driver_lease(outcome: RemoteOutcome, run: Run) -> bool:
    """Keep this process's lease row on the handoff while it waits; False if another
    coordinator has taken the handoff over, in which case this one stops driving it."""
    book = run.book
    if run.store is None or book.driver is None:
        return True
    now = time.monotonic()
    if now - outcome.lease_renewed_at < book.driver_lease_seconds / 3:
        return True
    outcome.lease_renewed_at = now
    if run.store.renew(book.driver, outcome.record.attempt_id, book.driver_lease_seconds):
        return True
    outcome.notes.append("another coordinator took this handoff over; stopped driving it")
    return False


def _commit(outcome: RemoteOutcome, run: Run, to: HandoffState, reason: str) -> bool:
    """Commit a transition; False if the handoff moved meanwhile (the view was stale)."""
    try:
        outcome.record = run.book.commit(outcome.record, to, reason)
        return True
    except StaleRevision:
        outcome.record = run.book.current(outcome.record)
        return False


async def _follow(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    task: Task,
    run: Run,
    wait: WaitPolicy,
    headers: dict[str, str],
    stream: RemoteUpdates | None = None,
) -> None:
    """Observe the remote task until it settles, the lease ends or the run cancels it.

    Updates come on ``stream`` (the send's own response) when there is one, else from
    ``SubscribeToTask`` when the card says the agent streams, else by polling; either way
    each one is observed as a Task. Facts gathered meanwhile are written whenever the
    wait for the next update is not short (see :meth:`RemoteUpdates.next`)."""
    updates = stream or updates_for(
        client,
        agent.endpoint,
        task,
        headers,
        streams=bool(agent.agent_card.capabilities.streaming),
        backoff=PollBackoff(wait.first_poll, wait.max_poll),
        notes=outcome.notes,
    )
    try:
        settled = await _watch(client, agent, outcome, task, run, headers, updates)
    finally:
        await updates.aclose()
    if settled is not None:
        await _settle(client, agent, outcome, settled, run, headers)


async def _watch(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    task: Task,
    run: Run,
    headers: dict[str, str],
    updates: RemoteUpdates,
) -> Task | None:
    """The remote task once it settled, or None if the handoff ended here first."""
    while True:
        outcome.task = task
        if not _observe(outcome, run, task):
            _arrived_late(outcome, run, task)
            return None
        state = task.status.state
        if state in TERMINAL_TASK_STATES or state in INTERRUPTED_TASK_STATES:
            return task
        if _lease_left(outcome, run) <= 0:
            await updates.aclose()
            if _commit(outcome, run, S.TIMED_OUT, "lease_expired"):
                remote_state = await _cancel_remote(client, agent, outcome, headers, run)
                if remote_state:
                    outcome.record = run.book.note(outcome.record, remote_state=remote_state)
            return None
        if not _hold_driver_lease(outcome, run):
            return None
        within = min(_lease_left(outcome, run), run.book.driver_lease_seconds / 3)
        task = await updates.next(within, on_idle=run.trail.flush)


def _observe(outcome: RemoteOutcome, run: Run, task: Task) -> bool:
    """Apply one observation of the remote task; False if the handoff already ended here."""
    current = run.book.current(outcome.record)
    if current.version != outcome.record.version or current.terminal:
        outcome.record = current
        return False
    view = local_view(task.status.state.value)
    record = run.book.note(outcome.record, remote_state=task.status.state.value)
    outcome.record = record
    unchanged = view.state is record.state and (
        view.reason == record.reason or view.state is not S.RUNNING
    )
    # SUBMITTED seen after the handoff moved on is an older observation: keep what we have.
    if unchanged or view.state is S.DISPATCHED or view.state is S.RETURNED:
        return True
    return _commit(outcome, run, view.state, view.reason) or not outcome.record.terminal


async def _settle(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    task: Task,
    run: Run,
    headers: dict[str, str],
) -> None:
    state = task.status.state
    if outcome.record.state is S.FAILED:
        outcome.admission = failure_admission(task)
        return
    if state in INTERRUPTED_TASK_STATES:
        admission = admit_interruption(task, outcome.record.return_contract)
        outcome.admission = admission
        outcome.decision = run.book.receive(
            outcome.record,
            admitted=admission.admitted,
            reason=admission.reason,
            content_hash=admission.content_hash,
            size=admission.size,
        )
        remote_state = await _cancel_remote(client, agent, outcome, headers, run)
        if _commit(outcome, run, S.CANCELLED, f"closed_{state.name.lower()}") and remote_state:
            outcome.record = run.book.note(outcome.record, remote_state=remote_state)
        return
    if state is not TaskState.COMPLETED:
        return
    based_on = outcome.record
    pause_point("before_admission")
    if not _commit(outcome, run, S.RETURNED, "remote_completed"):
        _arrived_late(outcome, run, task, based_on)
        return
    _judge(outcome, run, task)


def _judge(outcome: RemoteOutcome, run: Run, task: Task) -> None:
    """Return admission under the record's contract, then the book decides (admitted,
    rejected, held for review, stale or duplicate)."""
    returned = outcome.record
    admission = admit_task(
        task,
        expected_task_id=returned.remote_task_id or "",
        contract=returned.return_contract,
        expected_handoff=(returned.handoff_id, returned.attempt),
    )
    outcome.admission = admission
    outcome.decision = run.book.receive(
        returned,
        admitted=admission.admitted,
        reason=admission.reason,
        content_hash=admission.content_hash,
        size=admission.size,
        content=_artifact_content(task),
        held=admission.held,
    )
    if outcome.decision is ArtifactDecision.ADMITTED:
        _commit(outcome, run, S.ACCEPTED, admission.reason)
    elif outcome.decision is ArtifactDecision.HELD_FOR_REVIEW:
        _commit(outcome, run, S.RETURNED_UNVERIFIED, admission.reason)
    elif outcome.decision is ArtifactDecision.REJECTED:
        _commit(outcome, run, S.REJECTED, admission.reason)
    else:
        _commit(outcome, run, S.REJECTED, outcome.decision.value)


def _arrived_late(
    outcome: RemoteOutcome,
    run: Run,
    task: Task,
    based_on: HandoffRecord | None = None,
) -> None:
    """A completed result that lost the race: keep it for diagnosis, admit nothing."""
    if task.status.state is not TaskState.COMPLETED:
        return
    admission = admit_task(
        task,
        expected_task_id=task.id,
        contract=outcome.record.return_contract,
        expected_handoff=None,
    )
    outcome.admission = admission
    outcome.decision = run.book.receive(
        based_on or outcome.record,
        admitted=False,
        reason=admission.reason,
        content_hash=admission.content_hash,
        size=admission.size,
        content=_artifact_content(task),
    )


def _artifact_content(task: Task) -> object:
    return [
        a.model_dump(mode="json", by_alias=True, exclude_none=True) for a in task.artifacts or []
    ]


async def _cancel_remote(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    headers: dict[str, str],
    run: Run,
) -> str | None:
    """Send CancelTask as a best effort; the remote state it reports, if it answered."""
    task_id = outcome.record.remote_task_id
    if task_id is None:
        return None
    run.emit("cancel.sent", outcome.record, endpoint=agent.endpoint)
    run.trail.flush()
    try:
        task = await client.cancel_task(agent.endpoint, CancelTaskRequest(id=task_id), headers)
    except FederationError as exc:
        outcome.notes.append(f"cancel of remote task {task_id} not confirmed: {exc}")
        run.emit("cancel.unconfirmed", outcome.record, reason=exc.reason)
        return None
    state = task.status.state.value
    outcome.notes.append(f"cancel sent; remote task {task_id} is {state}")
    run.emit("cancel.acknowledged", outcome.record, remote_state=state)
    return state


async def cancel_branches(
    client: A2AClient, run: Run, agents: dict[str, RegisteredAgent]
) -> list[HandoffRecord]:
    """Cancel the run: commit it first (no new dispatch), then tell every live branch,
    each under the credentials of its own handoff."""
    cancelled = run.book.cancel()
    for record in cancelled:
        agent = agents.get(record.target)
        if agent is not None and record.remote_task_id is not None:
            headers = run.credentials.get(record.attempt_id, {})
            remote_state = await _cancel_remote(
                client, agent, RemoteOutcome(record=record), headers, run
            )
            current = run.book.current(record)
            if remote_state and current.version == record.version:
                run.book.note(current, remote_state=remote_state)
        run.record(run.book.current(record))
    run.trail.flush()
    return cancelled
