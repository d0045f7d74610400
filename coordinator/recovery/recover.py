"""Continuing after a crash, and sharing in-flight work between coordinator processes.

On start (``federation recover``, and ``federation serve coordinator`` continuously) a
coordinator claims in-flight handoffs from the shared database through their lease rows,
rebuilds each run's book from the stored records and budget units, and drives every
claimed handoff on from where it stands (see
:meth:`coordinator.dispatch.attempt.driver.HandoffDriver.drive`): a task that completed while nobody
watched goes through the normal return admission, an expired lease becomes TIMED_OUT with a
cancel sent, and nothing is dispatched twice, because the dispatch record and the
idempotency key decide.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agent_cards.keys import KeySet
from contracts.handoff import HandoffRecord, HandoffState
from coordinator.authority.delegator import Delegator, authority_from
from coordinator.dispatch.attempt.driver import HandoffDriver, RemoteOutcome, WaitPolicy
from coordinator.dispatch.attempts import retried
from coordinator.dispatch.retry import delay_left
from coordinator.errors import FederationError, StaleRevision
from coordinator.handoff.envelope import unit_from_row
from coordinator.handoff.run import Run
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.runs import (
    RunStore,
    driver_is_dead_here,
    local_driver_id,
)
from coordinator.telemetry import tracing
from coordinator.workspace import Workspace

S = HandoffState


def driver_id() -> str:
    """Who drives: unique per process, readable in the lease rows."""
    return local_driver_id()


def release_dead_drivers(store: RunStore) -> list[str]:
    """Free the leases of drivers on this host whose process is gone (a local crash),
    so recovery need not wait for their leases to lapse; remote drivers lapse by time."""
    dead = [driver for driver in store.drivers() if driver_is_dead_here(driver)]
    for driver in dead:
        store.release_driver(driver)
    return dead


def restore_run(
    ws: Workspace, store: RunStore, run_id: str, driver: str, lease_seconds: float
) -> Run:
    """Rebuild a run and its handoff book from the database (no new run is announced);
    ``driver`` is the process that claimed it and keeps its lease rows while it drives."""
    row = store.run(run_id)
    if row is None:
        raise FederationError(f"run {run_id} is not in the database", "unknown_run")
    authority = authority_from(row["authority"])
    started_at = datetime.fromisoformat(row["authority"]["started_at"])
    run = Run(
        owner=row["owner"],
        authority=authority,
        run_id=run_id,
        started_at=started_at,
        trail=ws.trail(),
        store=store,
        data=ws.data,
        announce=False,
        kind=row["kind"],
        driver=driver,
        trace_id=_trace_of(row["document"]),
        span_id=_span_of(row["document"]),
    )
    book = run.book
    book.driver_lease_seconds = lease_seconds
    book.state_version = int(row["document"].get("state_version", 0))
    for record in store.run_records(run_id):
        book.records[record.attempt_id] = record
        run.handoffs[record.attempt_id] = record
        if record.duplicate_key and record.live:
            book.active_keys[record.duplicate_key] = record.attempt_id
        if record.duplicate_key and record.state is S.ACCEPTED:
            book.completed_keys[record.duplicate_key] = record.attempt_id
    book.units = [unit_from_row(unit) for unit in store.rows("budget_units", run_id)]
    for branch in row["document"].get("branches", []):
        if isinstance(branch, dict) and isinstance(branch.get("remote_question"), dict):
            run.questions[str(branch["branch"])] = branch["remote_question"]
    book.cancelled = bool(row["document"].get("cancelled"))
    cancellation = row["document"].get("cancellation")
    if isinstance(cancellation, dict):
        book.cancellation = {str(k): str(v) for k, v in cancellation.items()}
    # what its driver concluded stays in every document this process writes
    derived = run.document()
    run.conclusion = {k: v for k, v in row["document"].items() if k not in derived}
    return run


async def recover(
    ws: Workspace,
    keys: KeySet,
    issuer: str,
    *,
    driver: str | None = None,
    lease_seconds: float = 30.0,
    wait: WaitPolicy | None = None,
) -> list[RemoteOutcome]:
    """Claim every in-flight handoff nobody drives and take each to a terminal state."""
    store = RunStore(ws.engine())
    me = driver or driver_id()
    registry = Registry(ws.data)
    outcomes = []
    release_dead_drivers(store)
    async with A2AClient() as client:
        for attempt_id in store.claim(me, lease_seconds):
            try:
                outcomes.append(
                    await resume(
                        ws,
                        registry,
                        client,
                        keys,
                        issuer,
                        attempt_id,
                        me,
                        wait or WaitPolicy(),
                        lease_seconds,
                    )
                )
            finally:
                store.release(me, attempt_id)
    return outcomes


async def resume(
    ws: Workspace,
    registry: Registry,
    client: A2AClient,
    keys: KeySet,
    issuer: str,
    attempt_id: str,
    driver: str,
    wait: WaitPolicy,
    lease_seconds: float = 30.0,
) -> RemoteOutcome:
    """Drive one handoff claimed from the database to its end. Its run gets a store of
    its own: a store holds a run's rows until the run's trail writes them with their
    events, and two runs sharing one would mix their rows (the worker once did)."""
    store = ws.run_store()
    stored = store.handoff(attempt_id)
    assert stored is not None
    # The return contract travels in the record itself (see contracts.returns).
    record, payload, _ = stored
    run = restore_run(ws, store, record.run_id, driver, lease_seconds)
    record = run.book.current(record)
    run.emit("handoff.resumed", record, state=record.state.value, driver=driver)
    lapsed = RemoteOutcome(record=record, sent_fields=tuple(payload or {}))
    if lapsed_unattended(run, lapsed):
        await run.trail.flush_durable()
        await save_document(store, run)
        return lapsed
    expires = int((run.started_at + timedelta(seconds=run.authority.lifetime_seconds)).timestamp())
    delegator = Delegator(keys, run.authority, issuer, run.run_id, expires, run.owner)
    agent = registry.get(record.target)
    handoff = HandoffDriver(
        client, agent, run, payload or {}, record, wait=wait, delegator=delegator
    )
    outcome = await retried(handoff, delay_left=retry_delay_left(ws, record, run.book.clock()))
    await save_document(store, run)
    return outcome


def retry_delay_left(ws: Workspace, record: HandoffRecord, now: datetime) -> float:
    """Seconds of its delay a retry still has to wait at ``now``: a retry is admitted at
    its failed predecessor's outcome point, with its delay in the same transaction
    (``handoff.retry_scheduled``); 0 for an attempt that is not such a retry."""
    if record.state is not S.ADMITTED or record.attempt < 2:
        return 0.0
    scheduled = [
        event
        for event in ws.ledger().events(record.run_id)
        if event.event_type == "handoff.retry_scheduled"
        and event.handoff_id == record.handoff_id
        and event.attempt == record.attempt - 1
    ]
    if not scheduled:
        return 0.0
    delay = float(scheduled[-1].data.get("delay_seconds", 0.0))
    return delay_left(scheduled[-1].recorded_at, delay, now)


def lapsed_unattended(run: Run, outcome: RemoteOutcome) -> bool:
    """End a handoff whose lease ran out while nobody could drive it (its coordinator
    died, or the database was unavailable) as TIMED_OUT ``lease_expired``, its timeout
    disposition deciding what the run does next, rather than minting a token past the
    lease (which the grant check refuses). A RETURNED handoff is judged as usual: its
    result arrived within the lease. True if the handoff was ended here."""
    record = outcome.record
    lease = record.lease_expires_at
    if not record.live or record.state is S.RETURNED or lease is None:
        return False
    if lease > run.book.clock():
        return False
    try:
        outcome.record = run.book.commit(record, S.TIMED_OUT, "lease_expired")
    except StaleRevision:
        outcome.record = run.book.current(record)
        return False
    outcome.notes.append(
        "the lease ran out while nobody could drive the handoff; the remote task, if any, "
        "is left to finish (no token can be minted past the lease to cancel it)"
    )
    run.record(outcome.record)
    return True


async def save_document(store: RunStore, run: Run) -> None:
    run.keep_state()
    await run.trail.flush_durable()


def _trace_of(document: dict[str, Any]) -> str:
    """The stored run's trace id, so that what a restarted coordinator does joins its trace."""
    trace_id = document.get("trace_id")
    return trace_id if isinstance(trace_id, str) and trace_id else tracing.trace_id_for_new_run()


def _span_of(document: dict[str, Any]) -> str | None:
    """The span the stored run started in, if it was kept (later work hangs under it)."""
    span_id = document.get("span_id")
    return span_id if isinstance(span_id, str) and span_id else None
