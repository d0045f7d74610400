"""One delegation by hand: ``federation delegate`` to any registered A2A v1.0 agent.

It goes through exactly the same path as a delegation inside a run (proposal, admission,
a narrowed grant when the target takes one, dispatch, lease, return admission). The
operator's authority for it is exactly what the target's skill declares, for the
principal and tenant given. What comes back is judged by the return contract given for this
delegation (``--return-schema``), else the one declared for the skill at registration, else
nothing is admitted: the artifact is kept and the handoff ends ``RETURNED_UNVERIFIED``.
``cancel_after`` cancels the run after that many seconds, to try cancellation by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_cards.keys import KeySet
from contracts.returns import ReturnContract
from coordinator.audit.log.events import AuditEvent
from coordinator.authority.delegator import Delegator, RunAuthority, required_scopes
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import cancel_branches, run_remote_handoff
from coordinator.handoff.run import Run, start_run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient
from coordinator.telemetry import tracing
from coordinator.workspace import Workspace

Listener = Callable[[AuditEvent], None]
OPERATOR = "operator"
# Who a cancel by Ctrl-C is recorded as, and why.
INTERRUPT_OPERATOR = "operator (interrupt)"
INTERRUPT_REASON = "interrupted (Ctrl-C)"


@dataclass
class Interruption:
    """How the operator stops a delegation driven in this process: :meth:`stop` (the
    first Ctrl-C) cancels its run, as ``federation cancel`` would. ``run_id`` is known
    once the run has started."""

    requested: asyncio.Event = field(default_factory=asyncio.Event)
    run_id: str | None = None

    def stop(self) -> None:
        self.requested.set()


@dataclass(frozen=True)
class DelegationOrder:
    agent: RegisteredAgent
    skill: str
    payload: dict[str, Any]
    timeout: float = 30.0
    cancel_after: float | None = None
    # None: the run's own principal, derived from its id (never one shared by runs).
    principal: str | None = None
    tenant: str = "default"
    # A contract for this delegation only; None: the skill's declared one, or none.
    return_contract: ReturnContract | None = None


async def delegate_once(
    order: DelegationOrder,
    keys: KeySet,
    issuer: str,
    ws: Workspace,
    client: A2AClient | None = None,
    interruption: Interruption | None = None,
    listener: Listener | None = None,
) -> tuple[Run, RemoteOutcome, dict[str, Any]]:
    """:func:`_delegate_once` in the run's span: the trace the run's trace id names."""
    target = {tracing.PREFIX + "target": order.agent.name, tracing.PREFIX + "skill": order.skill}
    with tracing.span(tracing.PREFIX + "run", target) as span:
        run, outcome, document = await _delegate_once(
            order, keys, issuer, ws, client, interruption, listener
        )
        span.set_attribute(tracing.PREFIX + "run_id", run.run_id)
        span.set_attribute(tracing.PREFIX + "state", outcome.record.state.value)
        return run, outcome, document


async def _delegate_once(
    order: DelegationOrder,
    keys: KeySet,
    issuer: str,
    ws: Workspace,
    client: A2AClient | None = None,
    interruption: Interruption | None = None,
    listener: Listener | None = None,
) -> tuple[Run, RemoteOutcome, dict[str, Any]]:
    """One handoff driven to its end; through ``client`` (a long-lived process's pooled
    client) when given, else through a client of its own. ``cancel_after`` or an
    ``interruption`` cancels the run first; ``listener`` hears each event, the run's
    start first."""
    scopes = required_scopes(order.agent.agent_card, order.skill) or frozenset({"a2a:delegate"})
    authority = RunAuthority(principal=order.principal, tenant=order.tenant, scopes=scopes)
    run = start_run(ws, OPERATOR, authority=authority, kind="delegation", listener=listener)
    if interruption is not None:
        interruption.run_id = run.run_id
    expires_at = int(run.book.parent.expires_at.timestamp())
    delegator = Delegator(keys, run.authority, issuer, run.run_id, expires_at, run.owner)
    wait = WaitPolicy(deadline_seconds=order.timeout)
    proposal = propose(
        run, order.agent, order.skill, order.payload, wait, contract=order.return_contract
    )
    async with contextlib.AsyncExitStack() as stack:
        if client is None:
            client = await stack.enter_async_context(A2AClient())
        concluded = Concluded(run)
        handoff = run_remote_handoff(
            client,
            order.agent,
            proposal,
            order.payload,
            run=run,
            wait=wait,
            delegator=delegator,
            conclude=concluded,
        )
        if order.cancel_after is None and interruption is None:
            outcome = await handoff
            return run, outcome, concluded.document
        work = asyncio.ensure_future(handoff)
        stop = asyncio.ensure_future((interruption or Interruption()).requested.wait())
        await asyncio.wait({work, stop}, timeout=order.cancel_after, return_when="FIRST_COMPLETED")
        interrupted = stop.done()
        stop.cancel()
        if not work.done():
            by, why = (INTERRUPT_OPERATOR, INTERRUPT_REASON) if interrupted else (OPERATOR, "")
            why = why or f"--cancel-after {order.cancel_after} s"
            await cancel_branches(client, run, {order.agent.name: order.agent}, by=by, why=why)
        outcome = await work
        # The driver may have seen the cancel and concluded before the remote answered
        # the CancelTask; the state that answer noted since is in the run as it stands.
        outcome.record = run.book.current(outcome.record)
        return run, outcome, dict(run.document(**run.conclusion))


class Concluded:
    """A delegation's conclusion, recorded at its last attempt's outcome point: the
    run's disposition and what it concluded, in the same transaction as the outcome."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.document: dict[str, Any] = {}

    def __call__(self, outcome: RemoteOutcome) -> None:
        record_disposition(self.run, outcome)
        # the document as kept (a copy: the kept one may still be read for its write)
        self.document = dict(self.run.conclude(**conclusion_of(self.run, outcome)))


def record_disposition(run: Run, outcome: RemoteOutcome) -> None:
    """The run's disposition, written with the run's document (:meth:`Run.save`)."""
    record = outcome.record
    run.emit(
        "run.disposition",
        status=record.state.value.lower(),
        summary=f"handoff {record.attempt_id} ended {record.state.value} ({record.reason})",
        owner=run.owner,
    )


def conclusion_of(run: Run, outcome: RemoteOutcome) -> dict[str, Any]:
    """What a delegation concluded beyond its records (which say its target, remote task,
    states and reason: see :mod:`coordinator.handoff.run_state`)."""
    record = outcome.record
    received = [
        a.model_dump(mode="json", by_alias=True, exclude_none=True)
        for a in (outcome.task.artifacts or [] if outcome.task else [])
    ]
    return {
        "return_contract": record.return_contract.summary(),
        "verdict": outcome.admission.verdict if outcome.admission else None,
        "remote_question": run.questions.get(record.attempt_id),
        "grant": outcome.grant,
        "received_artifacts": received,
        "notes": list(outcome.notes),
    }
