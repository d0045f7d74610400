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
from contextlib import closing
from pathlib import Path

import httpx

from coordinator.audit.ledger import Ledger
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.workspace import Workspace
from tests.coordinator.test_api import TOKEN
from tests.processes import PAYLOAD, federation, registered, wait_for
from tests.remote_risk.test_resume import TaskRows
from tests.servers import running


def test_a_send_to_a_remote_that_is_down_is_retried_until_it_is_back(tmp_path: Path) -> None:
    with registered(tmp_path) as (data, remote):
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


def test_a_submitted_handoff_is_retried_by_the_worker_until_the_remote_is_back(
    tmp_path: Path,
) -> None:
    """``wait: false`` through the API: the background worker meets the remote down, and
    its later attempts reach it once it is back; one remote task, ACCEPTED."""
    with registered(tmp_path) as (data, remote), closing(Workspace(data)) as ws:
        remote.stop()
        settings = CoordinatorSettings(operator_token=TOKEN, worker_lease_seconds=5.0)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with (
            running(create_api(ws, settings)) as api,
            httpx.Client(base_url=api, headers=headers, timeout=30, trust_env=False) as http,
        ):
            body = {"to": "remote-risk", "skill": "interpret-risk-policy", "input": PAYLOAD}
            answer = http.post("/v1/delegations", json={**body, "wait": False, "timeout": 30})
            assert answer.status_code == 202, answer.text
            run_id = answer.json()["run_id"]
            time.sleep(3)
            remote.start()

            def accepted() -> bool:
                branches = http.get(f"/v1/runs/{run_id}").json()["branches"]
                return bool(branches) and branches[-1]["state"] == "ACCEPTED"

            wait_for(accepted, 60, "the handoff to be accepted")
    rows = TaskRows(f"sqlite+pysqlite:///{tmp_path / 'remote' / 'remote-risk.db'}")
    assert rows.states() == ["TASK_STATE_COMPLETED"], "exactly one remote task"


def test_a_run_cancelled_while_a_retry_waits_still_records_its_ending(tmp_path: Path) -> None:
    """The remote stays down; the run is cancelled (``--cancel-after``) while the next
    attempt waits its backoff. The run's disposition and document are still written: the
    run shows cancelled and the ledger says so, like any other ending."""
    with registered(tmp_path) as (data, remote):
        remote.stop()  # and down for good
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    delegating = federation(
        data.root,
        *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
        *("--input", str(input_file), "--timeout", "30", "--cancel-after", "1.5", "--json"),
    )
    out, err = delegating.communicate(timeout=90)
    document = json.loads(out)
    assert document["run_id"], err
    ws = Workspace(data)
    events = Ledger(ws.engine()).events(document["run_id"])
    kinds = [e.event_type for e in events]
    assert "handoff.retry_scheduled" in kinds and "run.cancelled" in kinds, kinds
    assert kinds[-1] == "run.disposition", kinds
    stored = ws.run_store().run(document["run_id"])
    ws.close()
    assert stored is not None and stored["document"].get("local_state") == document["local_state"]
