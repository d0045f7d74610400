"""Remote task states map onto local handoff states through one table."""

from __future__ import annotations

import pytest

from contracts.handoff import HandoffState
from contracts.wire import TaskState
from coordinator.handoff.state_map import local_view

S = HandoffState


@pytest.mark.parametrize(
    ("remote", "local", "reason"),
    [
        (TaskState.SUBMITTED, S.DISPATCHED, "remote_submitted"),
        (TaskState.WORKING, S.RUNNING, "remote_working"),
        (TaskState.COMPLETED, S.RETURNED, "remote_completed"),
        (TaskState.FAILED, S.FAILED, "remote_failed"),
        (TaskState.CANCELED, S.CANCELLED, "remote_canceled"),
        (TaskState.REJECTED, S.FAILED, "remote_rejected"),
        (TaskState.INPUT_REQUIRED, S.RUNNING, "needs_attention_input_required"),
        (TaskState.AUTH_REQUIRED, S.RUNNING, "needs_attention_auth_required"),
        (TaskState.UNSPECIFIED, S.QUARANTINED, "remote_state_unknown"),
    ],
)
def test_each_remote_state(remote: TaskState, local: HandoffState, reason: str) -> None:
    """Every v1.0 task state has its local state and reason."""
    view = local_view(remote.value)
    assert (view.state, view.reason) == (local, reason)


@pytest.mark.parametrize("raw", ["completed", "TASK_STATE_DONE", "", "TASK_STATE_COMPLETED "])
def test_unknown_states_are_quarantined(raw: str) -> None:
    """Anything not in the table, including v0.3 names, is quarantined, never success."""
    assert local_view(raw).state is S.QUARANTINED


def test_interrupted_states_are_never_success() -> None:
    """Input- and auth-required keep the handoff running; they grant nothing."""
    for remote in (TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED):
        assert local_view(remote.value).state not in (S.RETURNED, S.ACCEPTED)
