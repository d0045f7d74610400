"""A handoff ended elsewhere: a cancel from another process, and a result that came late.

``federation cancel`` and the API's cancel route commit a run's cancellation from whatever
process they run in, while the handoff is driven by another one (a worker, ``serve
coordinator`` or a ``delegate`` process). The store keeps an ended handoff ended (see
:func:`coordinator.storage.runs.RunStore.save_handoff`); the driver reads its row back
while it follows the remote task and, finding it ended, adopts that revision instead of
admitting whatever the remote sends later.
"""

from __future__ import annotations

from contracts.handoff import HandoffRecord
from contracts.wire import Task, TaskState
from coordinator.handoff.envelope import unit_from_row
from coordinator.handoff.returns import Admission, admit_task, artifact_content
from coordinator.handoff.run import Run
from coordinator.handoff.verdicts import ArtifactDecision


def ended_by_another(run: Run, record: HandoffRecord, lost: bool = False) -> HandoffRecord | None:
    """The stored revision of ``record`` if another process ended it, adopted into the
    run's book (with the budget units it settled and who cancelled the run); else None.
    ``lost``: this process's own ending was refused by the store (``HandoffMovedOn``),
    so the stored revision is adopted whatever this process holds."""
    store = run.store
    if store is None:
        return None
    if not lost:
        if record.terminal or run.book.current(record).version != record.version:
            return None  # ended, or moved on in this process: the driver sees that itself
        if not store.ended(record.attempt_id):
            return None
        run.trail.flush()  # an observation older than the stored row is not written
    stored = store.handoff(record.attempt_id)
    if stored is None or not stored[0].terminal:
        return None
    if not lost and stored[0].version < record.version:
        return None
    units = [unit_from_row(row) for row in store.rows("budget_units", run.run_id)]
    adopted = run.book.adopt(stored[0], units)
    row = store.run(run.run_id)
    cancellation = row["document"].get("cancellation") if row else None
    if isinstance(cancellation, dict):
        run.book.cancellation = {str(k): str(v) for k, v in cancellation.items()}
    run.record(adopted)
    return adopted


def keep_late(
    run: Run, task: Task, based_on: HandoffRecord
) -> tuple[Admission, ArtifactDecision] | None:
    """A completed result that lost the race to a cancel or a lease expiry: kept for
    diagnosis (judged, with its hash and content), never admitted."""
    if task.status.state is not TaskState.COMPLETED:
        return None
    admission = admit_task(
        task, expected_task_id=task.id, contract=based_on.return_contract, expected_handoff=None
    )
    decision = run.book.receive(
        based_on,
        admitted=False,
        reason=admission.reason,
        content_hash=admission.content_hash,
        size=admission.size,
        content=artifact_content(task),
    )
    return admission, decision
