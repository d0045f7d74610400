"""The remote is down when the message is sent, and back before the handoff's deadline.

Real processes: remote_risk, registered and then stopped, and ``federation delegate``
with a 30 s deadline. remote_risk is started again on the same port and data directory a
few seconds later; the delegation's later attempt, under the same idempotency key,
reaches it. The handoff ends ACCEPTED with exactly one remote task, and the ledger holds
every attempt with its cause.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from coordinator.audit.ledger import Ledger
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import RemoteRiskProcess, federation
from tests.remote_risk.test_resume import PAYLOAD, TaskRows


def test_a_send_to_a_remote_that_is_down_is_retried_until_it_is_back(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    remote = RemoteRiskProcess(tmp_path / "remote", data.path("jwks.json"))
    remote.start()
    try:
        remote.register_with(data)
        remote.stop()
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        waiting = federation(
            data.root,
            *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
            *("--input", str(input_file), "--timeout", "30", "--json"),
        )
        time.sleep(3)  # the first attempts meet a closed port
        remote.start()
        out, err = waiting.communicate(timeout=90)
    finally:
        remote.stop()
    document = json.loads(out)
    assert document["local_state"] == "ACCEPTED", err
    rows = TaskRows(f"sqlite+pysqlite:///{tmp_path / 'remote' / 'remote-risk.db'}")
    assert rows.states() == ["TASK_STATE_COMPLETED"], "exactly one remote task"
    ws = Workspace(data)
    events = Ledger(ws.engine()).events(document["run_id"])
    retries = [e for e in events if e.event_type == "handoff.retry_scheduled"]
    assert retries and all(e.data["cause"] == "dispatch_failed:unreachable" for e in retries)
    assert document["branches"][-1]["attempt"] == len(retries) + 1
    ws.close()
