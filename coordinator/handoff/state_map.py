"""How a remote A2A task state maps onto the coordinator's own handoff state.

One table, read in one place. Interrupted states (input or auth required) keep the
handoff RUNNING with a reason that asks for attention: they are never success and never
a grant of authority. A state this table does not know, including UNSPECIFIED, puts the
handoff in QUARANTINED: it is held apart and never counted as success.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.handoff import HandoffState
from contracts.wire import TaskState


@dataclass(frozen=True)
class LocalView:
    state: HandoffState
    reason: str


REMOTE_TO_LOCAL: dict[TaskState, LocalView] = {
    TaskState.SUBMITTED: LocalView(HandoffState.DISPATCHED, "remote_submitted"),
    TaskState.WORKING: LocalView(HandoffState.RUNNING, "remote_working"),
    TaskState.INPUT_REQUIRED: LocalView(HandoffState.RUNNING, "needs_attention_input_required"),
    TaskState.AUTH_REQUIRED: LocalView(HandoffState.RUNNING, "needs_attention_auth_required"),
    TaskState.COMPLETED: LocalView(HandoffState.RETURNED, "remote_completed"),
    TaskState.FAILED: LocalView(HandoffState.FAILED, "remote_failed"),
    TaskState.CANCELED: LocalView(HandoffState.CANCELLED, "remote_canceled"),
    TaskState.REJECTED: LocalView(HandoffState.FAILED, "remote_rejected"),
}

QUARANTINE = LocalView(HandoffState.QUARANTINED, "remote_state_unknown")

# A2A v0.3 named the same states in lower case; "unknown", and any string not listed,
# is UNSPECIFIED, which the table above quarantines.
V03_TASK_STATES: dict[str, TaskState] = {
    "submitted": TaskState.SUBMITTED,
    "working": TaskState.WORKING,
    "input-required": TaskState.INPUT_REQUIRED,
    "auth-required": TaskState.AUTH_REQUIRED,
    "completed": TaskState.COMPLETED,
    "failed": TaskState.FAILED,
    "canceled": TaskState.CANCELED,
    "rejected": TaskState.REJECTED,
}


def v03_task_state(remote_state: object) -> TaskState:
    """The v1.0 state a v0.3 state string stands for (UNSPECIFIED if none)."""
    if not isinstance(remote_state, str):
        return TaskState.UNSPECIFIED
    return V03_TASK_STATES.get(remote_state, TaskState.UNSPECIFIED)


def local_view(remote_state: str) -> LocalView:
    """The local state and reason for a remote state given as its wire string."""
    try:
        state = TaskState(remote_state)
    except ValueError:
        return QUARANTINE
    return REMOTE_TO_LOCAL.get(state, QUARANTINE)
