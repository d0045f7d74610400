"""A slow database never stalls remote_risk's other requests (issue 20, item 4).

remote_risk on PostgreSQL as a real process, and ``federation delegate`` as another;
a third session locks the task table against writes, so the send's transaction has to
wait (seen in ``pg_stat_activity``). Meanwhile remote_risk answers /livez and its card;
once the lock goes, the handoff ends ACCEPTED with one task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from coordinator.storage.datadir import DataDir
from member_kit.storage.schema import tasks
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, registered, wait_for

WAITING = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
    "AND wait_event = 'relation' AND pid <> pg_backend_pid()"
)


@pytest.fixture
def remote(tmp_path: Path, postgres_url: str) -> Iterator[tuple[RemoteRiskProcess, DataDir]]:
    # short leases: the background lease rounds (writes too) come while the lock is held
    lease = ("--task-lease-seconds", "1")
    with registered(tmp_path, *lease, database_url=postgres_url) as (data, process):
        yield process, data


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def test_livez_answers_while_a_send_waits_on_the_database(
    remote: tuple[RemoteRiskProcess, DataDir], postgres_url: str, tmp_path: Path
) -> None:
    process, data = remote
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    with (
        psycopg.connect(_libpq(postgres_url)) as holder,
        psycopg.connect(_libpq(postgres_url), autocommit=True) as watcher,
    ):
        holder.execute(f"LOCK TABLE {tasks.name} IN SHARE MODE")  # reads pass, writes wait
        delegating = federation(
            data.root, "delegate", "--to", "remote-risk", "--skill", "interpret-risk-policy",
            "--input", str(input_file), "--timeout", "60", "--json",
        )  # fmt: skip

        def blocked() -> bool:
            row = watcher.execute(WAITING).fetchone()
            return bool(row and row[0])

        wait_for(blocked, 60, "remote_risk's send to wait on the task table's lock")
        for _ in range(3):  # across more than one lease round (a third of a second each)
            live = httpx.get(f"{process.listening_url}/livez", timeout=30)
            card = httpx.get(f"{process.listening_url}/.well-known/agent-card.json", timeout=30)
            assert live.status_code == 200 and card.status_code == 200
            time.sleep(0.4)
        assert delegating.poll() is None and blocked()  # still waiting: answered meanwhile
        holder.rollback()  # the lock goes
    out, err = delegating.communicate(timeout=120)
    assert delegating.returncode == 0, err
    assert json.loads(out)["local_state"] == "ACCEPTED"
