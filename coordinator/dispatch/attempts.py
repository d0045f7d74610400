"""A logical handoff as a series of attempts, and the cancellation of a run's branches.

Each attempt is one :class:`~coordinator.dispatch.attempt.driver.HandoffDriver`. A transport
failure is retried as the same logical handoff with the next attempt number, within the
same lease and the run's budget; the idempotency key stays the same, so a remote that did
get the first send hands back the task it already has.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from contracts.handoff import HandoffRecord, HandoffState
from coordinator.authority.delegator import Delegator
from coordinator.dispatch.attempt.attempt_state import Conclusion
from coordinator.dispatch.attempt.driver import HandoffDriver
from coordinator.dispatch.attempt.outcome import RemoteOutcome
from coordinator.dispatch.attempt.proposal import WaitPolicy
from coordinator.dispatch.retry import (
    KID_UNKNOWN,
    UNREACHABLE,
    UNREACHABLE_RETRY_SECONDS,
    Cause,
    RetryPolicy,
    kid_unknown_delay,
    next_delay,
)
from coordinator.handoff.run import Run
from coordinator.handoff.run_state import refused_retry
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient


async def run_remote_handoff(
    client: A2AClient,
    agent: RegisteredAgent,
    proposal: HandoffRecord,
    payload: dict[str, Any],
    *,
    run: Run,
    wait: WaitPolicy | None = None,
    delegator: Delegator | None = None,
    conclude: Conclusion | None = None,
) -> RemoteOutcome:
    """Admit ``proposal`` (nothing is sent if it fails) and drive it, attempt by attempt.
    ``conclude`` records what the caller concludes from the last attempt (a run's
    disposition and document) in that attempt's outcome point: one transaction."""
    driver = HandoffDriver(
        client, agent, run, payload, proposal, wait=wait or WaitPolicy(), delegator=delegator
    )
    decided = _Decision(driver, conclude, None)
    return await _following(decided, driver.attempt())


async def retried(driver: HandoffDriver, *, delay_left: float = 0.0) -> RemoteOutcome:
    """Drive an attempt claimed from the database (a worker's or recovery's) and the
    attempts that follow it, under the same retry rules as :func:`run_remote_handoff`.
    A retry still within its delay (``delay_left`` seconds of it: its process stopped
    while it waited) waits the rest out before it is sent, as it would have there."""
    decided = _Decision(driver, None, None)
    waiting = delay_left > 0 and driver.record.state is HandoffState.ADMITTED
    first = driver.proceed(delay_left) if waiting else driver.drive()
    return await _following(decided, first)


async def _following(first: _Decision, attempt: Awaitable[RemoteOutcome]) -> RemoteOutcome:
    """``attempt`` (the first's) and the attempts after it, each admitted at its
    predecessor's outcome point and driven after its delay; the handoff's outcome."""
    decided = first
    try:
        outcome = await attempt
        while decided.next is not None and decided.delay is not None:
            delay, decided = decided.delay, decided.next
            outcome = await decided.driver.proceed(delay)
        return decided.final or outcome
    finally:
        first.settled()


class _Decision:
    """Whether another attempt follows, decided at the attempt's outcome point (and
    again if that point is refused and an ending from elsewhere adopted). The next
    attempt is admitted right there, so the failed attempt and the one that follows land
    in one transaction: no view reads the handoff as ended in between, and recovery
    finds the retry if this process stops during its delay. Only the last attempt's
    outcome carries the caller's conclusion."""

    def __init__(
        self, driver: HandoffDriver, conclude: Conclusion | None, previous: RemoteOutcome | None
    ) -> None:
        self.driver = driver
        self.conclude = conclude
        self.previous = previous
        self.delay: float | None = None
        self.next: _Decision | None = None
        self.final: RemoteOutcome | None = None
        driver.conclude = self

    def settled(self) -> None:
        """The attempts are over: each driver lets go of its decision. A driver and its
        decision refer to each other; left so, only the garbage collector would free
        them, and the run they hold with every record of it."""
        decision: _Decision | None = self
        while decision is not None:
            decision.driver.conclude = None
            decision = decision.next

    def __call__(self, outcome: RemoteOutcome) -> None:
        self.delay = retry_delay(self.driver)  # the last call decides
        if self.delay is not None:
            if self.next is None:
                self.next = self._schedule(outcome, self.delay)
            return
        self._withdraw()
        if self.final is None or self.final.record.attempt_id != outcome.record.attempt_id:
            self.final = first_cause(self.driver.run, outcome, self.previous)
        if self.conclude is not None:
            self.conclude(self.final)

    def _schedule(self, outcome: RemoteOutcome, delay: float) -> _Decision:
        """The next attempt, admitted now (or its refusal recorded)."""
        driver, failed = self.driver, outcome.record
        driver.run.emit("handoff.retry_scheduled", failed, cause=failed.reason, delay_seconds=delay)
        following = HandoffDriver(
            driver.client, driver.agent, driver.run, driver.payload, next_proposal(failed),
            wait=driver.wait, delegator=driver.delegator,
        )  # fmt: skip
        following.outcome.notes[:0] = [
            *outcome.notes,
            f"attempt {failed.attempt} failed ({failed.reason}); retrying in {delay:.2f} s",
        ]
        decided = _Decision(following, self.conclude, outcome)
        following.admit()
        return decided

    def _withdraw(self) -> None:
        """Forget a retry admitted at an outcome point the store then refused (another
        process ended the handoff first): nothing of it landed."""
        if self.next is not None:
            self.driver.run.forget(self.next.driver.record)
            self.next = None


def first_cause(run: Run, outcome: RemoteOutcome, previous: RemoteOutcome | None) -> RemoteOutcome:
    """What the handoff came to: ``outcome``, unless it is a retry that admission refused
    (the failed attempts spent the run's budget): then the attempt before it, whose
    failure is the cause, with the refusal in its notes and the ledger."""
    refused = outcome.record
    if refused.attempt > 1 and refused.reason == f"dispatch_failed:{UNREACHABLE}":
        window = f"{UNREACHABLE_RETRY_SECONDS:g} s"
        gave_up = f"still unreachable when the retry window ({window}) or the lease ran out"
        run.emit(
            "handoff.retries_stopped",
            refused,
            cause=gave_up,
            first_cause=refused.reason,
            attempts=refused.attempt,
        )
        return outcome
    if previous is None or not refused_retry(refused):
        return outcome
    cause = run.book.current(previous.record)
    run.emit(
        "handoff.retries_stopped",
        cause,
        cause=refused.reason,
        first_cause=cause.reason,
        attempts=refused.attempt,
    )
    note = (
        f"attempt {refused.attempt} was refused at admission ({refused.reason}): the "
        f"retries spent the run's budget; the handoff ends as attempt {cause.attempt} did"
    )
    return replace(previous, record=cause, notes=[*outcome.notes, note])


def next_proposal(failed: HandoffRecord) -> HandoffRecord:
    """The same handoff proposed again as its next attempt (contract, lease and
    idempotency key unchanged; nothing of the failed attempt's remote state)."""
    return failed.model_copy(
        update={
            "attempt": failed.attempt + 1,
            "state": HandoffState.PROPOSED,
            "version": 0,
            "reason": "proposed",
            "remote_task_id": None,
            "remote_state": None,
            "events": (),
        }
    )


def retry_delay(driver: HandoffDriver) -> float | None:
    """How long to wait before another attempt, or None: only a failure that says nothing
    about the work (:func:`~coordinator.dispatch.retry.cause_of`: the remote unreachable,
    timing out, not speaking JSON-RPC, or answering InternalError or a delegation check it
    could not make, e.g. its database down) is retried, by that module's backoff and not
    before the wait the remote asked for, within the attempts allowed and never past the
    lease, and never for a cancelled run; a refusal of a key the remote does not know yet
    (``kid_unknown``) once, after the wait the remote asked for."""
    record = driver.record
    if record.state is not HandoffState.FAILED or driver.run.book.cancelled:
        return None
    if not record.reason.startswith("dispatch_failed:"):
        return None
    reason = record.reason.removeprefix("dispatch_failed:")
    policy = RetryPolicy(max_attempts=driver.wait.max_attempts)
    if reason == KID_UNKNOWN:
        refused = _earlier_attempts_failed(driver, record.reason)
        asked = driver.outcome.retry_after
        return kid_unknown_delay(policy, record.attempt, refused, asked, driver.lease_left())
    cause = Cause(reason, driver.outcome.retryable, driver.outcome.retry_after)
    failing = _failing_for(driver)
    return next_delay(policy, record.attempt, cause, driver.lease_left(), failing_for=failing)


def _failing_for(driver: HandoffDriver) -> float:
    """Seconds since the first attempt of the driver's handoff failed."""
    record, book = driver.record, driver.run.book
    failed = [
        event.at
        for earlier in book.records.values()
        if earlier.handoff_id == record.handoff_id
        for event in earlier.events
        if event.state is HandoffState.FAILED
    ]
    return (book.clock() - min(failed)).total_seconds() if failed else 0.0


def _earlier_attempts_failed(driver: HandoffDriver, reason: str) -> int:
    """How many earlier attempts of the driver's handoff failed for ``reason``."""
    record = driver.record
    return sum(
        1
        for earlier in driver.run.book.records.values()
        if earlier.handoff_id == record.handoff_id
        and earlier.attempt < record.attempt
        and earlier.reason == reason
    )


async def cancel_branches(
    client: A2AClient,
    run: Run,
    agents: dict[str, RegisteredAgent],
    *,
    by: str = "",
    why: str = "",
) -> list[HandoffRecord]:
    """Cancel the run: commit it first (no new dispatch), then tell every live branch,
    each under the credentials of its own handoff. ``by`` and ``why`` are recorded."""
    cancelled = run.book.cancel(by=by, why=why)
    for record in cancelled:
        agent = agents.get(record.target)
        if agent is not None and record.remote_task_id is not None:
            await HandoffDriver(client, agent, run, {}, record).cancel()
        run.record(run.book.current(record))
    run.trail.flush()  # the run's cancellation is on disk before the caller goes on
    return cancelled
