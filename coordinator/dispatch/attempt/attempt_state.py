"""One handoff attempt's state: what it needs and its record as it stands.

:class:`AttemptState` holds what an attempt needs (client, target, run, payload, wait
policy, delegator) and its :class:`~coordinator.dispatch.attempt.outcome.RemoteOutcome`; its record
changes only by committing to the run's :class:`~coordinator.handoff.book.HandoffBook`,
guarded by the version it was based on. The steps that take it on are
:class:`~coordinator.dispatch.attempt.driver.HandoffDriver`'s,
:mod:`~coordinator.dispatch.attempt.settling` and
:mod:`~coordinator.dispatch.attempt.cancelling`. Where the record must be on disk before
the next step is named in :data:`DURABLE_POINTS`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from contracts.handoff import HandoffRecord, HandoffState
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    Message,
    Task,
    TaskState,
)
from coordinator.audit.trail import Cause
from coordinator.authority.delegator import Delegator
from coordinator.dispatch.attempt.elsewhere import ended_by_another
from coordinator.dispatch.attempt.outcome import RemoteOutcome
from coordinator.dispatch.attempt.proposal import WaitPolicy
from coordinator.handoff.book import StaleRevision
from coordinator.handoff.run import Run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient

Conclusion = Callable[[RemoteOutcome], None]
"""What the caller concludes from an attempt, recorded at the attempt's outcome point."""
# The points where what the attempt recorded so far must be on disk before it goes on.
# A completed handoff passes two: its intent and its outcome; the others are on the paths
# of a handoff that is recovered, waits long or is cancelled.
DURABLE_POINTS = {
    "intent": "the admitted handoff, its grant, DISPATCHED and the message, before it leaves",
    "observing": "what is known, before a handoff sent earlier is read back from the remote",
    "waiting": "facts gathered meanwhile, whenever the wait for the next update is not short",
    "cancelling": "the decision to cancel, before CancelTask is sent",
    "outcome": "everything the attempt (and, on its last attempt, the run) concluded",
}


def settled(task: Task) -> bool:
    """Whether the remote task is terminal or interrupted: nothing more comes of it."""
    state = task.status.state
    return state in TERMINAL_TASK_STATES or state in INTERRUPTED_TASK_STATES


def completes(state: TaskState) -> bool:
    """Whether seeing the remote task in ``state`` moves the handoff to RETURNED (when it
    settles, :mod:`~coordinator.dispatch.attempt.settling`): that observation is held
    for the move, which records it."""
    return state is TaskState.COMPLETED


class AttemptState:
    """One handoff attempt as it stands: what it needs, its outcome so far, and the one
    place its view of the record changes."""

    def __init__(
        self,
        client: A2AClient,
        agent: RegisteredAgent,
        run: Run,
        payload: dict[str, Any],
        record: HandoffRecord,
        *,
        wait: WaitPolicy | None = None,
        delegator: Delegator | None = None,
        conclude: Conclusion | None = None,
    ) -> None:
        self.client = client
        self.agent = agent
        self.run = run
        self.payload = payload
        self.wait = wait or WaitPolicy()
        self.delegator = delegator
        self.conclude = conclude
        self.outcome = RemoteOutcome(record=record, sent_fields=tuple(payload))
        self._lease_renewed_at = time.monotonic()
        self._checked_at = float("-inf")
        self._message: Message | None = None
        # when this attempt's message was sent (None: sent by an earlier driver)
        self._sent_at: float | None = None
        # the move to DISPATCHED recorded the message going out (it carries the dispatch)
        self._dispatch_recorded = False

    @property
    def record(self) -> HandoffRecord:
        return self.outcome.record

    @property
    def headers(self) -> dict[str, str]:
        """This attempt's request headers (its bearer token), held by the run in memory."""
        return self.run.credentials.get(self.record.attempt_id, {})

    def keep(self, record: HandoffRecord) -> HandoffRecord:
        """The one place the driver's view of the record changes."""
        self.outcome.record = record
        return record

    def _refresh(self) -> HandoffRecord:
        return self.keep(self.run.book.current(self.record))

    def commit(self, to: HandoffState, reason: str, cause: Cause | None = None) -> bool:
        """Commit a transition (recorded in its ``cause``, if given); False if the handoff
        moved meanwhile (the view was stale): then the cause is recorded alone."""
        try:
            self.keep(self.run.book.commit(self.record, to, reason, cause=cause))
            return True
        except StaleRevision:
            if cause is not None:
                self.run.book.tell(cause, self.record)
            self._refresh()
            return False

    def note(self, *, hold: bool = False, **changes: object) -> None:
        """Record observations (remote id, remote state) unless the handoff moved on
        (``hold``: see :meth:`HandoffBook.note`)."""
        try:
            self.keep(self.run.book.note(self.record, hold=hold, **changes))
        except StaleRevision:
            self._refresh()

    def release_held(self) -> None:
        """Record alone what this attempt holds for a move that will not come."""
        cause = self.run.book.held_for(self.record)
        if cause is not None:
            self.run.book.tell(cause, self.record)

    def lease_left(self) -> float:
        lease = self.record.lease_expires_at
        assert lease is not None
        return (lease - self.run.book.clock()).total_seconds()

    async def durable_point(self, name: str) -> None:
        """Everything recorded so far (the trail's events and the store's rows, in one
        transaction) is written before the step after ``name``; see :data:`DURABLE_POINTS`.
        The commit is the process's database writer's (grouped with other handoffs'
        points); the event loop goes on meanwhile."""
        assert name in DURABLE_POINTS, name
        await self.run.trail.flush_durable()

    def durable_point_now(self, name: str) -> None:
        """:meth:`durable_point` from a step that is not a coroutine (an ending adopted
        from elsewhere): rare, so it waits in place."""
        assert name in DURABLE_POINTS, name
        self.run.trail.flush()

    def ended_elsewhere(self, every: float = 0.0, lost: bool = False) -> bool:
        """Whether another process (``federation cancel``, the API's cancel route) ended
        this handoff meanwhile (asked at most ``every`` seconds; ``lost``: the store
        refused this process's own ending); if so its revision is adopted, and this
        driver stops."""
        now = time.monotonic()
        if now - self._checked_at < every:
            return False
        self._checked_at = now
        adopted = ended_by_another(self.run, self.record, lost)
        if adopted is None:
            return False
        self.keep(adopted)
        self.outcome.notes.append(f"ended elsewhere: {adopted.state.value} ({adopted.reason})")
        self.durable_point_now("outcome")
        return True
