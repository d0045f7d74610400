"""The path of one remote handoff: admission, dispatch, wait, return admission.

Each step moves the handoff record through the state table in :mod:`contracts.handoff`;
the remote task's state is translated by :mod:`coordinator.state_map` and never copied.
The coordinator never waits forever: polling stops at the handoff's deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from contracts.evidence import Finding, FindingStatus
from contracts.handoff import HandoffRecord, HandoffState, transition
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
)
from coordinator.client import A2AClient
from coordinator.errors import FederationError
from coordinator.registry import RegisteredAgent
from coordinator.returns import Admission, admit_task, finding_in
from coordinator.state_map import local_view

S = HandoffState


@dataclass(frozen=True)
class WaitPolicy:
    """How long a handoff may take, and how often the remote task is polled meanwhile."""

    deadline_seconds: float = 30.0
    first_poll: float = 0.05
    max_poll: float = 1.0


@dataclass
class RemoteOutcome:
    record: HandoffRecord
    task: Task | None = None
    admission: Admission | None = None
    sent_fields: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def finding(self) -> Finding | None:
        return self.admission.finding if self.admission else None


def build_message(record: HandoffRecord, payload: dict[str, Any]) -> Message:
    return Message(
        message_id=f"msg-{uuid.uuid4().hex}",
        role=Role.USER,
        parts=[Part(data=payload, media_type="application/json")],
        metadata={
            "handoffId": record.handoff_id,
            "attempt": record.attempt,
            "skillId": record.skill,
            "idempotencyKey": f"{record.handoff_id}:{record.attempt}",
        },
    )


def admit_dispatch(record: HandoffRecord, agent: RegisteredAgent) -> HandoffRecord:
    """Admission before anything is sent: the target must declare the requested skill."""
    if agent.agent_card.skill(record.skill) is None:
        return transition(record, S.REJECTED, "skill_not_declared_by_target")
    return transition(record, S.ADMITTED, "admitted")


async def run_remote_handoff(
    client: A2AClient,
    agent: RegisteredAgent,
    record: HandoffRecord,
    payload: dict[str, Any],
    *,
    sent_record_ids: Collection[str] | None,
    wait: WaitPolicy | None = None,
    headers: dict[str, str] | None = None,
) -> RemoteOutcome:
    wait = wait or WaitPolicy()
    outcome = RemoteOutcome(record=admit_dispatch(record, agent), sent_fields=tuple(payload))
    if outcome.record.state is not S.ADMITTED:
        return outcome
    deadline = time.monotonic() + wait.deadline_seconds
    request = SendMessageRequest(
        message=build_message(outcome.record, payload),
        configuration=SendMessageConfiguration(
            accepted_output_modes=["application/json"], return_immediately=True
        ),
    )
    # The dispatch is recorded before the message leaves, so a crash mid-send is visible.
    outcome.record = transition(outcome.record, S.DISPATCHED, "message_sending")
    try:
        response = await asyncio.wait_for(
            client.send_message(agent.endpoint, request, headers), wait.deadline_seconds
        )
    except TimeoutError:
        outcome.record = transition(outcome.record, S.TIMED_OUT, "lease_expired_during_dispatch")
        return outcome
    except FederationError as exc:
        outcome.record = transition(outcome.record, S.FAILED, f"dispatch_failed:{exc.reason}")
        outcome.notes.append(str(exc))
        return outcome
    if response.task is None:
        outcome.record = transition(outcome.record, S.FAILED, "remote_replied_without_task")
        return outcome
    task = response.task
    outcome.record = outcome.record.model_copy(update={"remote_task_id": task.id})
    task = await _observe_until_settled(client, agent, outcome, task, deadline, wait, headers)
    outcome.task = task
    if outcome.record.state is S.RETURNED:
        _admit_return(outcome, task, sent_record_ids)
    elif outcome.record.state is S.FAILED:
        outcome.admission = _failure_admission(task)
    elif task.status.state in INTERRUPTED_TASK_STATES:
        outcome.admission = admit_interruption(task, sent_record_ids)
        await close_branch(
            client, agent, outcome, f"closed_{task.status.state.name.lower()}", headers
        )
    elif outcome.record.state is S.TIMED_OUT:
        await _cancel_best_effort(client, agent, outcome, headers)
    return outcome


def admit_interruption(task: Task, sent_record_ids: Collection[str] | None) -> Admission:
    """An interrupted task may explain what it lacks; only a ``needs_input`` Finding counts.

    It is read from the status message as untrusted evidence: it never counts as success,
    and it grants nothing (an auth-required task is not an authorization).
    """
    digest = ("", 0)
    message = task.status.message
    if message is None or sent_record_ids is None:
        return Admission(False, "interrupted_without_finding", *digest)
    try:
        finding = finding_in([Artifact(artifact_id="status", parts=message.parts)])
    except ValueError as exc:
        return Admission(False, f"finding_invalid: {exc}", *digest)
    if finding.status is not FindingStatus.NEEDS_INPUT:
        return Admission(False, "finding_inconsistent_with_state", *digest)
    if set(finding.evidence_ids) - set(sent_record_ids):
        return Admission(False, "unknown_evidence", *digest)
    return Admission(True, "needs_input_admitted", *digest, finding=finding)


async def close_branch(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    reason: str,
    headers: dict[str, str] | None,
) -> None:
    """End a live handoff this run will not continue: cancel it remotely, then locally."""
    await _cancel_best_effort(client, agent, outcome, headers)
    if not outcome.record.terminal:
        outcome.record = transition(outcome.record, S.CANCELLED, reason)


async def _cancel_best_effort(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    headers: dict[str, str] | None,
) -> None:
    task_id = outcome.record.remote_task_id
    if task_id is None:
        return
    try:
        task = await client.cancel_task(agent.endpoint, CancelTaskRequest(id=task_id), headers)
    except FederationError as exc:
        outcome.notes.append(f"cancel of remote task {task_id} not confirmed: {exc}")
        return
    outcome.record = outcome.record.model_copy(update={"remote_state": task.status.state.value})
    outcome.notes.append(f"cancel sent; remote task {task_id} is {task.status.state.value}")


def _apply_remote(outcome: RemoteOutcome, task: Task) -> None:
    view = local_view(task.status.state.value)
    record = outcome.record.model_copy(update={"remote_state": task.status.state.value})
    unchanged = view.state is record.state and (
        view.reason == record.reason or view.state is not S.RUNNING
    )
    # SUBMITTED seen after the handoff moved on is an older observation: keep what we have.
    if not unchanged and view.state is not S.DISPATCHED:
        record = transition(record, view.state, view.reason)
    outcome.record = record


async def _observe_until_settled(
    client: A2AClient,
    agent: RegisteredAgent,
    outcome: RemoteOutcome,
    task: Task,
    deadline: float,
    wait: WaitPolicy,
    headers: dict[str, str] | None,
) -> Task:
    delay = wait.first_poll
    while True:
        _apply_remote(outcome, task)
        state = task.status.state
        if state in TERMINAL_TASK_STATES or state in INTERRUPTED_TASK_STATES:
            return task
        if time.monotonic() + delay >= deadline:
            outcome.record = transition(outcome.record, S.TIMED_OUT, "lease_expired")
            return task
        await asyncio.sleep(delay)
        delay = min(delay * 2, wait.max_poll)
        try:
            task = await client.get_task(agent.endpoint, GetTaskRequest(id=task.id), headers)
        except FederationError as exc:
            outcome.notes.append(f"poll failed: {exc}")


def _admit_return(
    outcome: RemoteOutcome, task: Task, sent_record_ids: Collection[str] | None
) -> None:
    assert outcome.record.remote_task_id is not None
    admission = admit_task(
        task, expected_task_id=outcome.record.remote_task_id, sent_record_ids=sent_record_ids
    )
    outcome.admission = admission
    to = S.ACCEPTED if admission.admitted else S.REJECTED
    outcome.record = transition(outcome.record, to, admission.reason)


def _failure_admission(task: Task) -> Admission:
    """Read the remote's failed Finding, if it sent one, only to learn its error code."""
    message = task.status.message
    code = "remote_failed"
    if message is not None:
        try:
            reported = finding_in([Artifact(artifact_id="status", parts=message.parts)])
        except ValueError:
            reported = None
        if reported is not None and reported.error_code:
            code = reported.error_code
    failed = Finding(
        status=FindingStatus.FAILED,
        summary="The remote specialist did not produce a result.",
        error_code=code,
    )
    return Admission(False, "remote_failed", "", 0, finding=failed)
