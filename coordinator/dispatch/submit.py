"""A delegation submitted for the background workers to drive (``"wait": false``).

The handoff is admitted and recorded with its run, and its lease row, held by the
submitting request while it is written, is let go for whichever coordinator process
claims it first. Nothing is sent here. A refused admission is answered at once. Under an
``Idempotency-Key`` it happens once (:mod:`coordinator.storage.delegation_keys`): a retry
is answered the run the first request created. When the run's write fails with its
outcome unknown (the answer to its COMMIT lost), the lease is let go all the same, so
that a run committed after all is driven at once rather than when the lease runs out.
"""

from __future__ import annotations

import functools

from coordinator.authority.delegator import RunAuthority, required_scopes
from coordinator.dispatch.attempt.driver import WaitPolicy, admission_context, propose
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.handoff.run import Run, start_run
from coordinator.storage import delegation_keys
from coordinator.storage.delegation_keys import SubmissionKey
from coordinator.storage.faults import is_storage_fault
from coordinator.workspace import Workspace


def submit_for_workers(
    ws: Workspace, order: DelegationOrder, key: SubmissionKey | None
) -> dict[str, str]:
    """Admit and record ``order``'s handoff, once under ``key``: its run, its attempt and
    the handoff's state (``ADMITTED``, or the refusal's)."""
    store = ws.run_store()
    return delegation_keys.once(
        ws.engine(), key, functools.partial(_submit, ws, order), lambda found: found.view(store)
    )


def _submit(
    ws: Workspace, order: DelegationOrder, keep: delegation_keys.Keep | None
) -> dict[str, str]:
    scopes = required_scopes(order.agent.agent_card, order.skill) or frozenset({"a2a:delegate"})
    authority = RunAuthority(principal=order.principal, tenant=order.tenant, scopes=scopes)
    run = start_run(ws, "operator", authority=authority, kind="delegation")
    wait = WaitPolicy(deadline_seconds=order.timeout)
    record = run.book.admit(
        propose(run, order.agent, order.skill, order.payload, wait, contract=order.return_contract),
        admission_context(run, order.agent),
    )
    try:
        run.record(record)
        run.store.save_payload(record, order.payload, record.return_contract.kind.value)
        if keep is not None:
            run.trail.write_with(keep(run.run_id, record.attempt_id))
        run.save(run.document())
    finally:  # written or not (its outcome maybe unknown), the row is the workers' now
        _let_go(ws, run, record.attempt_id)
    return {"run_id": run.run_id, "attempt_id": record.attempt_id, "state": record.state.value}


def _let_go(ws: Workspace, run: Run, attempt_id: str) -> None:
    """Free the handoff's lease row this request held while writing it, for the workers.
    After a failed write, through a store of its own (the run's keeps what it could not
    write), and only as far as the database lets it: a row never written holds no lease,
    and one whose release meets a storage fault is taken when its lease runs out."""
    driver = run.book.driver
    if driver is None:
        return
    try:
        ws.run_store().release(driver, attempt_id)
    except Exception as error:
        if not is_storage_fault(error):
            raise
