"""remote_risk killed with SIGKILL mid-task resumes its unfinished work when it starts again.

Real processes: remote_risk (a slow skill, so the kill lands while the task is WORKING)
and ``federation delegate`` waiting on the handoff. remote_risk is killed and restarted
on the same data directory (or the same PostgreSQL schema); the waiting handoff must end
ACCEPTED, with exactly one remote task for it, rather than TIMED_OUT at its deadline.
With two replicas on one PostgreSQL database, the survivor takes over the dead one's task.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from tests.processes import PAYLOAD, Balancer, RemoteRiskProcess, federation, wait_for
from tests.servers import free_port

SLOW = ("--skill-delay-seconds", "3", "--task-lease-seconds", "2")


class TaskRows:
    """Reads remote_risk's task rows straight from its database."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url

    def states(self) -> list[str]:
        if self.url.startswith("sqlite"):
            path = self.url.split("///", 1)[1]
            if not Path(path).exists():
                return []
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
                try:
                    rows = connection.execute("SELECT state FROM remote_risk_tasks").fetchall()
                except sqlite3.OperationalError:
                    return []
            return [row[0] for row in rows]
        engine = create_engine(self.url)
        try:
            with engine.connect() as connection:
                rows = list(connection.execute(text("SELECT state FROM remote_risk_tasks")))
        except Exception:
            return []
        finally:
            engine.dispose()
        return [row[0] for row in rows]


@pytest.fixture
def coordinator_data(tmp_path: Path) -> DataDir:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)  # publishes jwks.json, which remote_risk trusts
    return data


@pytest.fixture(params=["sqlite", "postgresql"])
def remote_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+pysqlite:///{tmp_path / 'remote' / 'remote-risk.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def remotes(tmp_path: Path) -> Iterator[list[RemoteRiskProcess]]:
    started: list[RemoteRiskProcess] = []
    yield started
    for remote in started:
        remote.stop()


def delegate(data: DataDir, input_file: Path) -> Any:
    return federation(
        data.root,
        "delegate",
        "--to",
        "remote-risk",
        "--skill",
        "interpret-risk-policy",
        "--input",
        str(input_file),
        "--timeout",
        "30",
        "--json",
    )


def working(rows: TaskRows, waiting: Any) -> bool:
    """The remote task is WORKING; fails at once, with what it printed, if the delegating
    process has already ended (a timeout would hide why)."""
    if waiting.poll() is not None:
        out, err = waiting.communicate()
        pytest.fail(f"delegate ended before the task worked: {out!r} {err!r}")
    return rows.states() == ["TASK_STATE_WORKING"]


def finished(process: Any) -> dict[str, Any]:
    out, err = process.communicate(timeout=90)
    assert out, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_killed_mid_task_and_restarted_the_waiting_handoff_is_accepted(
    coordinator_data: DataDir,
    remote_database: str,
    remotes: list[RemoteRiskProcess],
    tmp_path: Path,
) -> None:
    remote = RemoteRiskProcess(
        tmp_path / "remote",
        coordinator_data.path("jwks.json"),
        *SLOW,
        database_url=None if remote_database.startswith("sqlite") else remote_database,
    )
    remotes.append(remote)
    remote.start()
    remote.register_with(coordinator_data)
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    rows = TaskRows(remote_database)

    waiting = delegate(coordinator_data, input_file)
    wait_for(lambda: working(rows, waiting), 30, "the remote task to work")
    remote.kill()
    killed = time.monotonic()
    remote.start()

    document = finished(waiting)
    ended = time.monotonic() - killed
    assert document["local_state"] == "ACCEPTED", document
    assert rows.states() == ["TASK_STATE_COMPLETED"], "exactly one remote task, completed"
    backend = remote_database.split(":", 1)[0]
    print(json.dumps({"fault": f"remote SIGKILL+restart ({backend})", "ended_s": round(ended, 2)}))


def test_a_replica_takes_over_the_task_of_a_dead_one(
    coordinator_data: DataDir,
    postgres_url: str,
    remotes: list[RemoteRiskProcess],
    tmp_path: Path,
) -> None:
    """Two replicas on one PostgreSQL schema behind one address; the one working the task
    is killed and never restarted. The other finds the task's lease run out, works it, and
    the handoff ends ACCEPTED with one remote task."""
    ports = [free_port(), free_port()]
    with Balancer(ports) as balancer:
        replicas = [
            RemoteRiskProcess(
                tmp_path / "remote",  # one key set for the service, whichever replica answers
                coordinator_data.path("jwks.json"),
                *SLOW,
                port=port,
                database_url=postgres_url,
                public_base_url=balancer.url,
            )
            for port in ports
        ]
        remotes.extend(replicas)
        for replica in replicas:
            replica.start()
        replicas[0].register_with(coordinator_data)
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        rows = TaskRows(postgres_url)

        waiting = delegate(coordinator_data, input_file)
        wait_for(lambda: working(rows, waiting), 30, "the remote task to work")
        replicas[0].kill()  # the first backend took the send, so it was working the task
        killed = time.monotonic()

        document = finished(waiting)
        ended = time.monotonic() - killed
    assert document["local_state"] == "ACCEPTED", document
    assert rows.states() == ["TASK_STATE_COMPLETED"]
    print(json.dumps({"fault": "replica SIGKILL (postgresql)", "ended_s": round(ended, 2)}))


def test_an_unfinished_task_whose_input_cannot_be_read_again_ends_failed(tmp_path: Path) -> None:
    """A task left unfinished whose stored message holds no readable skill input is not
    left WORKING: the next start ends it FAILED with ``resume_input_unreadable``."""
    from contracts.wire import Message, Part, Role
    from member_kit.server.jsonrpc import ANONYMOUS_OWNER
    from member_kit.server.store import open_store
    from tests.remote_risk.conftest import risk_peer

    left = open_store(10, member="remote_risk", data_dir=tmp_path)
    text_only = Message(message_id="m-1", role=Role.USER, parts=[Part(text="no data part")])
    task = left.tasks.create(ANONYMOUS_OWNER, text_only)
    left.tasks.release()  # as a stopped process leaves it
    left.close()
    with risk_peer(data_dir=tmp_path) as peer:

        def status() -> dict[str, Any]:
            found: dict[str, Any] = peer.result("GetTask", {"id": task.id})["status"]
            return found

        wait_for(lambda: status()["state"] == "TASK_STATE_FAILED", 10, "the task to end")
        [part] = status()["message"]["parts"]
    assert part["data"]["errorCode"] == "resume_input_unreadable"
