"""A logical handoff as a series of attempts, and the cancellation of a run's branches.

Each attempt is one :class:`~coordinator.dispatch.driver.HandoffDriver`. A transport
failure is retried as the same logical handoff with the next attempt number, within the
same lease and the run's budget; the idempotency key stays the same, so a remote that did
get the first send hands back the task it already has.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contracts.handoff import HandoffRecord, HandoffState
from coordinator.authority.delegator import Delegator
from coordinator.dispatch.driver import Conclusion, HandoffDriver
from coordinator.dispatch.outcome import RemoteOutcome
from coordinator.dispatch.proposal import WaitPolicy
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
from coordinator.remote.client import A2AClient
from coordinator.remote.registry import RegisteredAgent

# Failures after which sending again can help: the message may never have arrived, or a
# proxy answered instead of the agent (a body that is not JSON-RPC, or not JSON at all).
# A remote's refusal, an A2A error or an answer that fails admission is never retried.
RETRYABLE = frozenset({"unreachable", "timeout", "transport_error", "not_jsonrpc", "not_json"})


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
    after: float = 0.0,
) -> RemoteOutcome:
    """Admit ``proposal`` (nothing is sent if it fails) and drive it, attempt by attempt.
    ``conclude`` records what the caller concludes from the last attempt (a run's
    disposition and document) in that attempt's outcome point: one transaction. Each
    retry is admitted as soon as it is scheduled and sent after its delay (``after``, for
    the first attempt driven here when it is itself a retry)."""
    wait = wait or WaitPolicy()
    notes: list[str] = []
    previous: RemoteOutcome | None = None
    delay = after
    while True:
        decided = _Decision(conclude, previous)
        driver = HandoffDriver(
            client, agent, run, payload, proposal, wait=wait, delegator=delegator,
            conclude=decided,
        )  # fmt: skip
        decided.driver = driver
        driver.outcome.notes[:0] = notes
        outcome = await driver.attempt(delay)
        due = decided.delay if decided.made else retry_delay(driver)
        if due is None:
            return decided.final or outcome
        delay = due
        previous, failed = outcome, outcome.record
        notes = [
            *outcome.notes,
            f"attempt {failed.attempt} failed ({failed.reason}); retrying in {delay:.2f} s",
        ]
        run.emit("handoff.retry_scheduled", failed, cause=failed.reason, delay_seconds=delay)
        if run.book.cancelled:
            return await _concluded_late(run, outcome, conclude)
        proposal = proposal.model_copy(update={"attempt": failed.attempt + 1})


async def _concluded_late(
    run: Run, outcome: RemoteOutcome, conclude: Conclusion | None
) -> RemoteOutcome:
    """The conclusion of an attempt whose outcome point passed without it (another
    attempt was due, then the run was cancelled while it waited), in a point of its own."""
    if conclude is not None:
        conclude(outcome)
        await run.trail.flush_durable()
    return outcome


class _Decision:
    """Whether another attempt follows, decided at the attempt's outcome point (and
    again if that point is refused and an ending from elsewhere adopted): only the last
    attempt's outcome carries the caller's conclusion."""

    def __init__(self, conclude: Conclusion | None, previous: RemoteOutcome | None) -> None:
        self.conclude = conclude
        self.previous = previous
        self.driver: HandoffDriver | None = None
        self.made = False
        self.delay: float | None = None
        self.final: RemoteOutcome | None = None

    def __call__(self, outcome: RemoteOutcome) -> None:
        assert self.driver is not None
        self.made, self.delay = True, retry_delay(self.driver)  # the last call decides
        if self.delay is not None:
            return
        if self.final is None or self.final.record.attempt_id != outcome.record.attempt_id:
            self.final = first_cause(self.driver.run, outcome, self.previous)
        if self.conclude is not None:
            self.conclude(self.final)


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


async def retried(driver: HandoffDriver, outcome: RemoteOutcome) -> RemoteOutcome:
    """After one driven attempt (a worker's or recovery's), the attempts that follow it
    under the same retry rules as :func:`run_remote_handoff`; ``outcome`` if none may."""
    delay = retry_delay(driver)
    if delay is None:
        return outcome
    failed = driver.record
    driver.run.emit("handoff.retry_scheduled", failed, cause=failed.reason, delay_seconds=delay)
    if driver.run.book.cancelled:
        return outcome
    return await run_remote_handoff(
        driver.client,
        driver.agent,
        next_proposal(failed),
        driver.payload,
        run=driver.run,
        wait=driver.wait,
        delegator=driver.delegator,
        after=delay,
    )


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
    about the work (the remote unreachable, timing out, or not speaking JSON-RPC) is
    retried, by :mod:`coordinator.dispatch.retry`'s backoff, within the attempts allowed
    and never past the lease, and never for a cancelled run; a refusal of a key the remote
    does not know yet (``kid_unknown``) once, after the wait the remote asked for."""
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
    cause = Cause(reason, reason in RETRYABLE)
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
