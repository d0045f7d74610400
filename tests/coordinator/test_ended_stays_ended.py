"""The store keeps an ended handoff ended: the race a cancel from another process can win.

Two processes hold the same handoff: one drives it, one cancels it. Whoever writes an
ending first wins; the other's ending is refused (``HandoffMovedOn``, nothing of that
flush lands, events included) and an older observation is not written over the row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.handoff import HandoffState
from coordinator.errors import HandoffMovedOn
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.test_run_store_batching import admitted, new_run

S = HandoffState


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(DataDir(tmp_path))
    yield ws
    ws.close()


def test_an_ending_that_lost_to_a_cancel_writes_nothing(workspace: Workspace) -> None:
    driving = new_run(workspace)
    record = admitted(driving)
    running = driving.book.commit(record, S.DISPATCHED, "message_sending")
    driving.trail.flush()
    # Another process (its own store) commits the cancel first.
    canceller = workspace.run_store()
    canceller.save_handoff(running.model_copy(update={"state": S.CANCELLED, "version": 3}))
    stored = canceller.handoff(running.attempt_id)
    assert stored is not None and stored[0].state is S.CANCELLED
    # An observation older than that row is not written over it.
    driving.book.note(running, remote_state="TASK_STATE_WORKING")
    driving.trail.flush()
    assert workspace.run_store().run_records(driving.run_id)[0].state is S.CANCELLED
    # The driver's own ending is refused, with the events flushed with it.
    before = len(workspace.ledger().events(driving.run_id))
    driving.book.commit(driving.book.current(running), S.FAILED, "remote_failed")
    with pytest.raises(HandoffMovedOn):
        driving.trail.flush()
    assert workspace.run_store().run_records(driving.run_id)[0].state is S.CANCELLED
    assert len(workspace.ledger().events(driving.run_id)) == before
