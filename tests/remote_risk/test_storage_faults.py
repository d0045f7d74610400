"""remote_risk's SQLite database read-only for a few seconds while a task is working.

The task's outcome cannot be stored when its skill finishes; that is not the task's
failure: the work ends without marking the task FAILED, its lease is not renewed, and
once the database is back the task is resumed and completes, in the same process, no
restart. Meanwhile readiness (/healthz, a real write) answers 503 and liveness 200.
How the fault is made as root: :mod:`tests.faults`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from member_kit.storage.engine import DATABASE_FILE
from tests.faults import database_files, immutable_flag_works, read_only
from tests.processes import wait_for
from tests.remote_risk.conftest import risk_input, risk_peer


def test_work_cut_off_by_a_read_only_database_is_resumed_once_it_is_back(
    tmp_path: Path,
) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    files = database_files(tmp_path / DATABASE_FILE)
    settings = {"data_dir": tmp_path, "skill_delay_seconds": 1.0, "task_lease_seconds": 1.0}
    with risk_peer(**settings) as peer:
        task = peer.send(risk_input(), {"returnImmediately": True})

        def state() -> str:
            found = peer.result("GetTask", {"id": task["id"]})
            return str(found["status"]["state"])

        wait_for(lambda: state() == "TASK_STATE_WORKING", 10, "the task to work")
        assert peer.http.get("/healthz").status_code == 200
        read_only(files, True)
        try:
            time.sleep(2.5)  # the skill finishes meanwhile; its outcome cannot be stored
            ready = peer.http.get("/healthz")
            alive = peer.http.get("/livez")
        finally:
            read_only(files, False)
        wait_for(lambda: state() == "TASK_STATE_COMPLETED", 20, "the task to be resumed")
        assert len(peer.app.state.task_store) == 1
        assert peer.http.get("/healthz").status_code == 200
    assert ready.status_code == 503 and ready.headers["Retry-After"] == "2"
    assert ready.json()["error"]["reason"] == "storage_unavailable"
    assert alive.status_code == 200
