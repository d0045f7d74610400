"""Cancelling a handoff's remote task: ``CancelTask`` as a best effort, and what it reports.

A handoff whose lease ended, whose run was cancelled, or whose remote task was interrupted
is not continued here: its remote task is sent ``CancelTask``, after the decision to cancel
is on disk (the ``cancelling`` durable point), and the state the remote reports is noted
unless the handoff moved on meanwhile.
"""

from __future__ import annotations

from contracts.handoff import HandoffRecord
from contracts.wire import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES, Task
from coordinator.dispatch.attempt import receipts, remote_calls
from coordinator.dispatch.attempt.attempt_state import AttemptState, settled
from coordinator.dispatch.attempt.faults import async_pause_point
from coordinator.errors import FederationError


def _settled(record: HandoffRecord) -> bool:
    """Whether the remote state noted on ``record`` is one nothing more comes of."""
    settled_states = {state.value for state in (*TERMINAL_TASK_STATES, *INTERRUPTED_TASK_STATES)}
    return record.remote_state in settled_states


async def cancel(attempt: AttemptState) -> None:
    """Send CancelTask for this handoff's remote task and note the state it reports,
    unless the handoff moved on meanwhile (to another state), or a settled remote
    state is noted already. A note since (a renewed lease, under load) is not moving
    on: the answer was dropped then, and the run kept showing the remote WORKING."""
    remote_state = await cancel_remote(attempt)
    current = attempt.run.book.current(attempt.record)
    if remote_state and current.state is attempt.record.state and not _settled(current):
        attempt.keep(attempt.run.book.note(current, remote_state=remote_state))


async def cancel_unnamed(attempt: AttemptState, task: Task) -> None:
    """A live remote task of a handoff that ended while its message was out (a run
    cancelled here or by another process mid-send): whoever ended it could not name
    the task, so it is named now and told, rather than left working for nobody."""
    record = attempt.record
    if not record.terminal or record.remote_task_id is not None or settled(task):
        return
    attempt.keep(attempt.run.book.note(record, remote_task_id=task.id))
    await cancel(attempt)


async def cancel_remote(attempt: AttemptState) -> str | None:
    """Send CancelTask as a best effort; the remote state it reports, if it answered."""
    task_id = attempt.record.remote_task_id
    if task_id is None:
        return None
    attempt.run.emit("cancel.sent", attempt.record, endpoint=attempt.agent.endpoint)
    await attempt.durable_point("cancelling")
    await async_pause_point("before_cancel_task")
    try:
        task = await remote_calls.cancel_task(
            attempt.client, attempt.agent, task_id, attempt.headers
        )
    except FederationError as exc:
        attempt.outcome.notes.append(f"cancel of remote task {task_id} not confirmed: {exc}")
        attempt.run.emit("cancel.unconfirmed", attempt.record, reason=exc.reason)
        return None
    receipts.witness_receipt(attempt.run, attempt.agent, attempt.record, task)
    state = task.status.state.value
    attempt.outcome.notes.append(f"cancel sent; remote task {task_id} is {state}")
    attempt.run.emit("cancel.acknowledged", attempt.record, remote_state=state)
    return state
