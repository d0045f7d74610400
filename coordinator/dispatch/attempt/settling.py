"""What a settled remote task came to: failed, interrupted (then cancelled) or completed,
and a completed one's return admission, or its late arrival.

A completed task is admitted under the record's return contract and the run's book
decides (admitted, rejected, held for review, stale or duplicate); a result that lost the
race to a cancel or a lease expiry is kept for diagnosis, never admitted.
"""

from __future__ import annotations

from contracts.handoff import HandoffRecord, HandoffState
from contracts.wire import INTERRUPTED_TASK_STATES, Task, TaskState
from coordinator.dispatch.attempt import observed, receipts
from coordinator.dispatch.attempt.attempt_state import AttemptState
from coordinator.dispatch.attempt.cancelling import cancel_remote
from coordinator.dispatch.attempt.elsewhere import keep_late
from coordinator.dispatch.attempt.faults import pause_point
from coordinator.handoff.question import remote_question
from coordinator.handoff.returns import (
    admit_interruption,
    admit_task,
    artifact_content,
    failure_admission,
)
from coordinator.handoff.usage import usage_change
from coordinator.handoff.verdicts import ArtifactDecision

S = HandoffState


async def settle(attempt: AttemptState, task: Task) -> None:
    """A settled remote task: failed, interrupted (then cancelled here) or completed."""
    state = task.status.state
    if state is not TaskState.COMPLETED:
        receipts.witness_receipt(attempt.run, attempt.agent, attempt.record, task)
    if attempt.record.state is S.FAILED:
        attempt.outcome.admission = failure_admission(task)
        return
    if state in INTERRUPTED_TASK_STATES:
        await _close_interrupted(attempt, task)
        return
    if state is not TaskState.COMPLETED:
        return
    based_on = attempt.record
    pause_point("before_admission")
    # the stored row was read when the task settled (see the driver's watch), just before this
    completed = attempt.run.book.held_for(attempt.record)  # the observation: it moves it
    if not attempt.commit(S.RETURNED, "remote_completed", cause=completed):
        arrived_late(attempt, task, based_on)
        return
    judge(attempt, task)


async def _close_interrupted(attempt: AttemptState, task: Task) -> None:
    """An interrupted task may explain itself (a ``needs_input`` Finding); either way
    this coordinator does not continue it: the remote task is cancelled."""
    if attempt.ended_elsewhere():
        return
    question = remote_question(task)
    if question is not None:
        attempt.run.asked(attempt.record, question)
    admission = admit_interruption(task, attempt.record.return_contract)
    attempt.outcome.admission = admission
    attempt.outcome.decision = attempt.run.book.receive(
        attempt.record,
        admitted=admission.admitted,
        reason=admission.reason,
        content_hash=admission.content_hash,
        size=admission.size,
    )
    remote_state = await cancel_remote(attempt)
    closed = f"closed_{task.status.state.name.lower()}"
    if attempt.commit(S.CANCELLED, closed) and remote_state:
        attempt.keep(attempt.run.book.note(attempt.record, remote_state=remote_state))


def judge(attempt: AttemptState, task: Task) -> None:
    """:func:`_judge`, in the span of the return admission with its verdict."""
    with observed.step("return_admission", attempt.record):
        _judge(attempt, task)
        admission, decision = attempt.outcome.admission, attempt.outcome.decision
        if admission is not None:
            observed.verdict(admission.admitted, admission.reason, decision and decision.value)


def _judge(attempt: AttemptState, task: Task) -> None:
    """Return admission under the record's contract, then the book decides (admitted,
    rejected, held for review, stale or duplicate)."""
    attempt.note(**usage_change(task))
    returned = attempt.record
    admission = admit_task(
        task,
        expected_task_id=returned.remote_task_id or "",
        contract=returned.return_contract,
        expected_handoff=(returned.handoff_id, returned.attempt),
        receipt=receipts.expectation_for(attempt.run, attempt.agent, returned),
    )
    carried = None  # the receipt, recorded in the verdict's event
    if admission.receipt is not None:
        carried = receipts.keep_receipt(
            attempt.run, attempt.agent, returned, admission.receipt, alone=False
        )
        receipts.follow_successions(attempt.run, attempt.agent, task)
    attempt.outcome.admission = admission
    attempt.outcome.decision = attempt.run.book.receive(
        returned,
        admitted=admission.admitted,
        reason=admission.reason,
        content_hash=admission.content_hash,
        size=admission.size,
        content=artifact_content(task),
        held=admission.held,
        move=_moved_by,  # recorded in the verdict's event
        carried=carried,
    )
    attempt.keep(attempt.run.book.current(returned))


def _moved_by(decision: ArtifactDecision, reason: str) -> tuple[HandoffState, str]:
    """Where an artifact's verdict moves its handoff, and why."""
    if decision is ArtifactDecision.ADMITTED:
        return S.ACCEPTED, reason
    if decision is ArtifactDecision.HELD_FOR_REVIEW:
        return S.RETURNED_UNVERIFIED, reason
    if decision is ArtifactDecision.REJECTED:
        return S.REJECTED, reason
    return S.REJECTED, decision.value


def arrived_late(attempt: AttemptState, task: Task, based_on: HandoffRecord | None = None) -> None:
    """A completed result that lost the race: keep it for diagnosis, admit nothing."""
    attempt.release_held()  # the observation that came with it, first
    late = keep_late(attempt.run, task, based_on or attempt.record)
    if late is not None:
        attempt.outcome.admission, attempt.outcome.decision = late
