"""The remote's database cannot be written when the message is sent, and can again later.

Real processes: remote_risk, registered, whose database (and its WAL) is then made
read-only (as in :mod:`tests.faults`), and ``federation delegate`` with a 30 s deadline.
remote_risk answers each send 503 ``storage_unavailable`` with ``Retry-After``, which the
coordinator takes as worth sending again; once the database takes writes again, a later
attempt under the same idempotency key is served by the same process (no restart). The
handoff ends ACCEPTED with exactly one remote task, and the ledger names the cause.
(Before, the remote answered its own database's fault as an internal error on a plain
200, the coordinator took it as final, and the handoff ended FAILED.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.audit.ledger import Ledger
from coordinator.workspace import Workspace
from member_kit.storage.engine import DATABASE_FILE
from tests.faults import database_files, immutable_flag_works, read_only
from tests.processes import PAYLOAD, federation, registered, wait_for
from tests.remote_risk.test_resume import TaskRows


def test_a_send_the_remote_s_database_refuses_is_retried_until_it_takes_writes(
    tmp_path: Path,
) -> None:
    if not immutable_flag_works(tmp_path):
        pytest.skip("this filesystem has no immutable flag (chattr +i)")
    log = tmp_path / "remote.log"
    database = tmp_path / "remote" / DATABASE_FILE
    with registered(tmp_path, log=log) as (data, _remote):
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        files = database_files(database)
        read_only(files, True)
        try:
            waiting = federation(
                data.root,
                *("delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy"),
                *("--input", str(input_file), "--timeout", "30", "--json"),
            )

            def refused() -> bool:
                return "the database failed the work of" in log.read_text()

            wait_for(refused, 30, "remote_risk to fail a send on its database")
        finally:
            read_only(files, False)
        out, err = waiting.communicate(timeout=90)
    document = json.loads(out)
    assert document["local_state"] == "ACCEPTED", err
    rows = TaskRows(f"sqlite+pysqlite:///{database}")
    assert rows.states() == ["TASK_STATE_COMPLETED"], "exactly one remote task"
    ws = Workspace(data)
    events = Ledger(ws.engine()).events(document["run_id"])
    retries = [e for e in events if e.event_type == "handoff.retry_scheduled"]
    ws.close()
    # each retry after at least the wait remote_risk asked for (Retry-After: 2)
    cause = "dispatch_failed:InternalError:storage_unavailable"
    assert retries and all(
        e.data["cause"] == cause and e.data["delay_seconds"] >= 2 for e in retries
    ), [e.data for e in retries]
