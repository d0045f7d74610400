"""Cancelling a run from any process: ``federation cancel`` and ``POST /v1/runs/{id}/cancel``.

The process that cancels is usually not the one driving the run's handoffs (a worker,
``serve coordinator`` or a ``delegate`` process), and a handoff's bearer token lives only
in its driver's memory. So the run is rebuilt from the store, the cancellation is
committed there first (no new dispatch, every live branch CANCELLED, who and why in the
ledger and the run's document), and each branch's remote task is sent ``CancelTask``
under a token minted now, with the coordinator's key, for that same handoff attempt: the
same principal, tenant, audience, scopes and handoff binding as the token it was sent
with, never wider. The driver notices the stored revision and admits nothing afterwards
(:mod:`coordinator.dispatch.attempt.elsewhere`).

A branch cancelled earlier whose remote task was never confirmed cancelled (a second
Ctrl-C during the first cancel, an unreachable remote) is sent ``CancelTask`` again, so
cancelling twice is how the operator finishes a cancel that was cut short.
"""

from __future__ import annotations

from typing import Any

from agent_cards.keys import KeySet
from contracts.handoff import HandoffRecord, HandoffState
from contracts.wire import TERMINAL_TASK_STATES
from coordinator.audit.receipts import GRANT_EVENT
from coordinator.authority.delegator import Delegator, GrantRefused, envelope_of, required_scopes
from coordinator.dispatch.attempt.driver import HandoffDriver
from coordinator.dispatch.attempt.grants import mint_for
from coordinator.errors import FederationError, RegistryError, RunEnded
from coordinator.handoff.run import Run
from coordinator.recovery.recover import restore_run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.client import A2AClient
from coordinator.workspace import Workspace

S = HandoffState

_SETTLED = frozenset(state.value for state in TERMINAL_TASK_STATES)


def unconfirmed(record: HandoffRecord) -> bool:
    """A branch cancelled here whose remote task is not known to have ended."""
    return (
        record.state is S.CANCELLED
        and record.remote_task_id is not None
        and record.remote_state not in _SETTLED
    )


async def cancel_run(
    ws: Workspace,
    keys: KeySet,
    issuer: str,
    run_id: str,
    *,
    by: str,
    why: str,
    client: A2AClient,
) -> dict[str, Any]:
    """Cancel every live branch of ``run_id``; the run's document afterwards."""
    store = ws.run_store()
    run = restore_run(ws, store, run_id, driver="", lease_seconds=0.0)
    run.book.driver = None  # cancelling takes no lease: the driver keeps its own
    records = list(run.book.records.values())
    live = [r for r in records if r.live or r.state is S.RETURNED]
    again = [r for r in records if unconfirmed(r)]
    if not live and not again:
        if run.book.cancelled:
            return run_document(ws, run)  # cancelled before: nothing more to do
        ended = ", ".join(sorted({r.state.value for r in records})) or "nothing"
        raise RunEnded(f"run {run_id} has no live branch to cancel (its branches: {ended})")
    agents = registered(Registry(ws.data), {r.target for r in records})
    delegator = run_delegator(run, keys, issuer)
    for record in live:
        if record.target in agents:
            arm(run, agents[record.target], record, delegator)
    if live:
        for record in run.book.cancel(by=by, why=why):
            run.record(record)
        # The branches, the events and who cancelled: on disk together, before any remote
        # is told, so the driver that notices reads all of it.
        run_document(ws, run)
    for record in again:
        if record.target in agents:
            arm(run, agents[record.target], record, delegator, ended=True)
    for record in [*live, *again]:
        current = run.book.current(record)
        agent = agents.get(record.target)
        if current.remote_task_id is not None and agent is not None:
            await HandoffDriver(client, agent, run, {}, current).cancel()
        elif current.remote_task_id is not None:
            run.emit("cancel.unconfirmed", current, reason="unknown_agent")
        run.record(run.book.current(record))
    return run_document(ws, run)


def registered(registry: Registry, names: set[str]) -> dict[str, RegisteredAgent]:
    """The run's targets still registered; a removed one cannot be told (its CancelTask
    is recorded as unconfirmed), but its branches are cancelled here all the same."""
    agents = {}
    for name in names:
        try:
            agents[name] = registry.get(name)
        except RegistryError:
            continue
    return agents


def run_delegator(run: Run, keys: KeySet, issuer: str) -> Delegator:
    expires = int(run.book.parent.expires_at.timestamp())
    return Delegator(keys, run.authority, issuer, run.run_id, expires, run.owner)


def arm(
    run: Run,
    agent: RegisteredAgent,
    record: HandoffRecord,
    delegator: Delegator,
    *,
    ended: bool = False,
) -> None:
    """Hold a token for ``record``'s own attempt, for its CancelTask.

    A live branch's token is minted exactly as its dispatch token was. An ended branch has
    settled its envelope, so its token is minted against that envelope alone: never wider
    than what it was sent with."""
    try:
        if not ended:
            minted = mint_for(run, agent, record, delegator, NO_REQUEST)
            run.credentials[record.attempt_id] = minted.headers
            return
        scopes = required_scopes(agent.agent_card, record.skill)
        if scopes is None or record.budget is None:
            return
        envelope = envelope_of(record.budget)
        grant = delegator.mint(
            record, agent.agent_id, scopes, remaining=envelope, message=NO_REQUEST
        )
        run.emit(GRANT_EVENT, record, **grant.summary())
        run.credentials[record.attempt_id] = {"Authorization": f"Bearer {grant.token}"}
    except (GrantRefused, FederationError) as exc:
        run.emit("cancel.unconfirmed", record, reason=exc.reason)


# A cancel token binds the digest of no message at all, so it can send none.
NO_REQUEST: dict[str, Any] = {}


def run_document(ws: Workspace, run: Run) -> dict[str, Any]:
    """The run's state written (with everything pending) and its document."""
    run.keep_state()
    run.trail.flush()
    return run.document(**run.conclusion)
