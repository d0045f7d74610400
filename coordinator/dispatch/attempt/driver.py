"""The path of one remote handoff attempt: admit, mint, send, follow, settle, judge.

A :class:`HandoffDriver` owns one attempt: what it needs (client, target, run, payload,
wait policy, delegator) and the record as it stands
(:class:`~coordinator.dispatch.attempt.attempt_state.AttemptState`). Its methods are the steps, up
to a settled remote task; what that task came to is :mod:`~coordinator.dispatch.attempt.settling`'s,
and ``CancelTask`` is :mod:`~coordinator.dispatch.attempt.cancelling`'s. The record changes only by
committing to the run's :class:`~coordinator.handoff.book.HandoffBook`, guarded by the
version it was based on. The remote task's state is translated by
:mod:`coordinator.handoff.state_map`, never copied. The handoff has an absolute lease: at its
end it is TIMED_OUT and the remote task is sent ``CancelTask`` as a best effort. If the run
is cancelled meanwhile, the cancel wins by revision and whatever arrives later is late.
Where the record must be on disk before the next step is named in
:data:`~coordinator.dispatch.attempt.attempt_state.DURABLE_POINTS`.
"""

from __future__ import annotations

import asyncio
import time

from contracts.handoff import HandoffState
from contracts.wire import Task, to_wire
from coordinator.audit.log.events import DISPATCH_EVENT
from coordinator.audit.trail import Cause, carried_by
from coordinator.authority.delegator import GrantRefused
from coordinator.dispatch.attempt import cancelling, observed, remote_calls, settling
from coordinator.dispatch.attempt.attempt_state import AttemptState, completes, settled
from coordinator.dispatch.attempt.faults import async_pause_point, pause_point
from coordinator.dispatch.attempt.grants import head_refreshed, mint_for
from coordinator.dispatch.attempt.outcome import RemoteOutcome
from coordinator.dispatch.attempt.proposal import (
    WaitPolicy,
    admission_context,
    build_message,
    idempotency_key,
    propose,
)
from coordinator.dispatch.attempt.send_modes import send_blocking, send_modes
from coordinator.dispatch.retry import cause_of
from coordinator.errors import FederationError, HandoffMovedOn, RemoteA2AError
from coordinator.handoff.admission import AdmissionDenied
from coordinator.handoff.book import RunCancelled, StaleRevision
from coordinator.handoff.returns import failed_reason
from coordinator.handoff.state_map import local_view
from coordinator.handoff.usage import usage_change
from coordinator.remote.streaming import PollBackoff, RemoteUpdates, updates_for

# What callers of this module use, re-exported from where each lives.
__all__ = [
    "HandoffDriver",
    "RemoteOutcome",
    "WaitPolicy",
    "admission_context",
    "propose",
]

S = HandoffState
# While the remote task works, how often its stored row is read for a cancel committed by
# another process. It is always read when the remote task settles (the canceller's
# CancelTask makes it settle at once) and before a result is admitted; this interval only
# bounds how long a remote that ignores CancelTask keeps a driver following it.
CHECK_ELSEWHERE_SECONDS = 2.0


class HandoffDriver(AttemptState):
    """One handoff attempt, from wherever its record stands to a terminal state.

    This is also how a restarted coordinator continues (:meth:`drive` on a stored record):
    an ADMITTED handoff was never sent; a DISPATCHED one without a remote task id may or
    may not have arrived, so it is sent again under the same idempotency key (the remote
    returns the task it already has); one with a task id is observed with GetTask; a
    RETURNED one is judged again. Every call carries a token minted for this attempt.
    """

    # --- one attempt, admitted here -----------------------------------------------------

    async def attempt(self) -> RemoteOutcome:
        """Admit the proposal (nothing is sent if it fails), record what will be sent, drive."""
        self.admit()
        return await self.proceed()

    def admit(self) -> bool:
        """Admit the proposal and record what will be sent; False if admission refused
        it (the refusal is recorded)."""
        run = self.run
        try:
            with observed.step("admission", self.record):
                context = admission_context(run, self.agent)
                self.keep(run.book.admit(self.record, context, hold=True))  # for the dispatch
        except (AdmissionDenied, RunCancelled) as exc:
            self.keep(run.book.records.get(self.record.attempt_id, self.record))
            observed.denied(exc.reason, self.record)
            self.outcome.notes.append(str(exc))
            run.record(self.record)
            return False
        if run.store is not None:
            contract = self.record.return_contract.kind.value
            run.store.save_payload(self.record, self.payload, contract)
        return True

    async def proceed(self, after: float = 0.0) -> RemoteOutcome:
        """Drive the admitted attempt, ``after`` a retry's delay. One that admission
        refused, or whose handoff ended while it waited (its run cancelled, here or by
        another process), is only concluded: nothing is sent for it."""
        if self.record.state is not S.ADMITTED or not await self.waited(after):
            await self.close()
            return self.outcome
        return await self.drive()

    async def waited(self, delay: float) -> bool:
        """Wait out a retry's delay (the attempt was admitted and written at the failed
        attempt's outcome point, so every view shows it live meanwhile and recovery drives
        it if this process stops); False if its handoff ended meanwhile."""
        if delay <= 0:
            return True
        await async_pause_point("retry_delay")
        await asyncio.sleep(delay)
        return not (self._refresh().terminal or self.ended_elsewhere())

    # --- from wherever the record stands ------------------------------------------------

    async def drive(self) -> RemoteOutcome:
        """:meth:`_drive` in the handoff's span (in its run's trace), counted in flight."""
        with observed.handoff(self.record, self.run.trace_id, self.run.span_id) as span:
            outcome = await self._drive()
            observed.ended(span, self.record)
        return outcome

    async def _drive(self) -> RemoteOutcome:
        """Take the admitted handoff to a terminal state; whatever it recorded is in the
        ledger when this returns. If another process ended the handoff first (a cancel),
        its revision is adopted and nothing this attempt concluded afterwards is kept."""
        try:
            await self._steps()
        except HandoffMovedOn:
            self.ended_elsewhere(lost=True)
        finally:
            await self.close()
        return self.outcome

    async def close(self) -> None:
        """The outcome point: what the attempt concluded and, through :attr:`conclude`,
        what its caller concludes from it (a run's disposition and document), in one
        transaction. If the store refused this ending (another process ended the handoff
        first), that ending is adopted and concluded from instead."""
        if self.conclude is not None:
            self.conclude(self.outcome)
        try:
            await self.durable_point("outcome")
        except HandoffMovedOn:
            self.ended_elsewhere(lost=True)
            if self.conclude is not None:
                self.conclude(self.outcome)
                self.durable_point_now("outcome")

    async def _steps(self) -> None:
        await head_refreshed(self.run, self.delegator)
        if not self.mint():
            return
        if self.record.state is S.ADMITTED:
            await self.dispatch()
        stream: RemoteUpdates | None = None
        if self.record.remote_task_id is None:
            task, stream = await self.send()
        else:
            task = await self.fetch()
        if task is not None and self.record.state is S.RETURNED:
            settling.judge(self, task)
        elif task is not None:
            await self.follow(task, stream)
        elif self.record.live and self.lease_left() <= 0:
            self.commit(S.TIMED_OUT, "lease_expired")
        self.run.record(self.record)

    def mint(self) -> bool:
        """The attempt's narrowed token, when the target takes delegation tokens; False
        (and the handoff FAILED) if minting would widen the run's authority."""
        try:
            with observed.step("mint", self.record):
                self._message = build_message(self.record, self.payload)
                request = to_wire(self._message)
                minted = mint_for(
                    self.run, self.agent, self.record, self.delegator, request, alone=False
                )
        except GrantRefused as exc:
            observed.grant_refused(exc.reason)
            self.commit(S.FAILED, exc.reason)
            self.outcome.notes.append(str(exc))
            self.run.record(self.record)
            return False
        if minted.note:
            self.outcome.notes.append(minted.note)
        self.outcome.grant = minted.grant
        self.run.credentials[self.record.attempt_id] = minted.headers
        return True

    async def dispatch(self) -> None:
        """Record the dispatch; it is written with the intent, before the message leaves,
        so a crash mid-send is visible (see :meth:`send`)."""
        with observed.step("dispatch", self.record):
            held = self.run.trail.take_held(self.record)  # its admission and grant
            sending = Cause(DISPATCH_EVENT, self._dispatch_facts(carried_by(held)))
            try:
                moved = self.run.book.commit(
                    self.record, S.DISPATCHED, "message_sending", cause=sending
                )
            except StaleRevision:
                self.run.trail.write_alone(held)  # nothing was dispatched: each alone
                raise
            self.keep(moved)
        self._dispatch_recorded = True

    async def send(self) -> tuple[Task | None, RemoteUpdates | None]:
        """Send the message; the task it opened, and its update stream if one is open.

        A skill known to answer at once gets one blocking ``SendMessage``, whose answer is
        the settled task (:mod:`coordinator.dispatch.attempt.send_modes`). Otherwise an agent whose
        card says it streams gets ``SendStreamingMessage`` (while the client has a stream
        slot free): the task and then its updates arrive on one response, which is handed
        on as the handoff's update source; else ``SendMessage`` with ``returnImmediately``,
        and the task is followed by polling."""
        if not self._dispatch_recorded:  # sent again after a restart: the move was before
            held = carried_by(self.run.trail.take_held(self.record))
            self.run.emit(DISPATCH_EVENT, self.record, **self._dispatch_facts(held))
        await async_pause_point("before_intent")
        # the intent is refused whole if another process ended the handoff meanwhile
        self.run.trail.write_with(self.run.store.refuse_if_ended(self.record.attempt_id))
        await self.durable_point("intent")
        # nothing of this attempt has left: a restart sends it under the same idempotency key
        # The stored row is next read when the remote task settles (or after
        # CHECK_ELSEWHERE_SECONDS of work), never admitting a result of a handoff ended
        # elsewhere; not here, right after the durable point, on every handoff.
        self._checked_at = time.monotonic()
        pause_point("before_dispatch")
        # the message the token was minted for: its digest is in the token
        message = self._message or build_message(self.record, self.payload)
        backoff = PollBackoff(self.wait.first_poll, self.wait.max_poll)
        modes = send_modes(self.client)
        blocking = await send_blocking(self.client, self.agent.endpoint, self.record.skill)
        self._sent_at = time.monotonic()
        try:
            task, stream = await remote_calls.send(
                self.client, self.agent, message, self.headers, backoff, self.outcome.notes,
                within=self.lease_left(), blocking=blocking,
            )  # fmt: skip
        except TimeoutError:
            modes.learned(self.agent.endpoint, self.record.skill, None)
            self.commit(S.TIMED_OUT, "lease_expired_during_dispatch")
            return None, None
        except FederationError as exc:
            modes.learned(self.agent.endpoint, self.record.skill, None)
            self.commit(S.FAILED, f"dispatch_failed:{exc.reason}")
            self.outcome.notes.append(str(exc))
            self.outcome.retry_after = exc.retry_after if isinstance(exc, RemoteA2AError) else None
            self.outcome.retryable = cause_of(exc).retryable
            return None, None
        if task is None:
            self.commit(S.FAILED, "remote_replied_without_task")
            return None, None
        pause_point("after_dispatch")
        if blocking and not settled(task):  # it did not answer at once after all
            modes.learned(self.agent.endpoint, self.record.skill, None)
        state = task.status.state
        self.note(remote_task_id=task.id, remote_state=state.value, hold=completes(state))
        return task, stream

    def _dispatch_facts(self, carried: dict[str, object]) -> dict[str, object]:
        """What the ledger records of the message going out: where, on which interface,
        under which idempotency key, with a token or not, and the facts held for it
        (``carried``: the attempt's admission and what is shown of its token)."""
        return {
            "endpoint": self.agent.endpoint,
            "interface": self.run.carried_on(self.record, self.agent.interface.summary()),
            "idempotency_key": idempotency_key(self.record),
            "with_token": bool(self.headers),
            **carried,
        }

    async def fetch(self) -> Task | None:
        """The remote task of a handoff sent earlier (by this process or one before it)."""
        await self.durable_point("observing")
        task_id = self.record.remote_task_id or ""
        try:
            return await remote_calls.get_task(self.client, self.agent, task_id, self.headers)
        except FederationError as exc:
            self.outcome.notes.append(f"could not read remote task {task_id}: {exc}")
            return None

    # --- following the remote task --------------------------------------------------------

    async def follow(self, task: Task, stream: RemoteUpdates | None = None) -> None:
        """Observe the remote task until it settles, the lease ends or the run cancels it.

        Updates come on ``stream`` (the send's own response) when there is one, else from
        ``SubscribeToTask`` when the card says the agent streams, else by polling; either
        way each one is observed as a Task. Facts gathered meanwhile are written whenever
        the wait for the next update is not short (see :meth:`RemoteUpdates.next`). A task
        that is settled already (a blocking send's answer) needs no updates."""
        updates = stream
        if updates is None and not settled(task):
            updates = updates_for(
                self.client,
                remote_calls.remote_of(self.client, self.agent),
                task,
                self.headers,
                streams=bool(self.agent.agent_card.capabilities.streaming),
                backoff=PollBackoff(self.wait.first_poll, self.wait.max_poll),
                notes=self.outcome.notes,
            )
        try:
            with observed.step("wait", self.record):
                done = await self.watch(task, updates)
        finally:
            if updates is not None:
                await updates.aclose()
        if done is not None:
            self.learn()
            await settling.settle(self, done)

    def learn(self) -> None:
        """How soon the task this attempt sent settled: how its skill is sent next."""
        if self._sent_at is not None:
            took = time.monotonic() - self._sent_at
            send_modes(self.client).learned(self.agent.endpoint, self.record.skill, took)

    async def watch(self, task: Task, updates: RemoteUpdates | None) -> Task | None:
        """The remote task once it settled, or None if the handoff ended here first
        (``updates`` is None only for a task that is settled already)."""
        while True:
            self.outcome.task = task
            now_settled = settled(task)
            every = 0.0 if now_settled else CHECK_ELSEWHERE_SECONDS
            if self.ended_elsewhere(every) or not self.observe(task):
                await cancelling.cancel_unnamed(self, task)
                settling.arrived_late(self, task)
                return None
            if now_settled:
                return task
            assert updates is not None
            if self.lease_left() <= 0:
                await updates.aclose()
                if self.commit(S.TIMED_OUT, "lease_expired"):
                    await self.cancel()
                return None
            if not self.hold_lease():
                return None
            within = min(self.lease_left(), self.run.book.driver_lease_seconds / 3)
            task = await updates.next(within, on_idle=lambda: self.durable_point("waiting"))

    def observe(self, task: Task) -> bool:
        """Apply one observation of the remote task; False if the handoff already ended here."""
        current = self.run.book.current(self.record)
        if current.version != self.record.version or current.terminal:
            self.keep(current)
            return False
        view = local_view(task.status.state.value)
        record = self.keep(
            self.run.book.note(
                self.record,
                remote_state=task.status.state.value,
                hold=completes(task.status.state),
                **usage_change(task),
            )
        )
        unchanged = view.state is record.state and (
            view.reason == record.reason or view.state is not S.RUNNING
        )
        # SUBMITTED seen after the handoff moved on is an older observation: keep what we have.
        if unchanged or view.state is S.DISPATCHED or view.state is S.RETURNED:
            return True
        reason = failed_reason(task) if view.state is S.FAILED else view.reason
        return self.commit(view.state, reason) or not self.record.terminal

    def hold_lease(self) -> bool:
        """Keep this process's lease row on the handoff while it waits; False if another
        coordinator has taken the handoff over, in which case this one stops driving it."""
        book, store = self.run.book, self.run.store
        if store is None or book.driver is None:
            return True
        now = time.monotonic()
        if now - self._lease_renewed_at < book.driver_lease_seconds / 3:
            return True
        self._lease_renewed_at = now
        if store.renew(book.driver, self.record.attempt_id, book.driver_lease_seconds):
            return True
        self.outcome.notes.append("another coordinator took this handoff over; stopped driving it")
        observed.taken_over()
        return False

    # --- cancelling -------------------------------------------------------------------------

    async def cancel(self) -> None:
        """Send CancelTask for this handoff's remote task and note the state it reports
        (:func:`~coordinator.dispatch.attempt.cancelling.cancel`)."""
        await cancelling.cancel(self)
