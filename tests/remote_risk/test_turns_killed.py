"""remote_risk killed with SIGKILL while many sends share its turns' commits loses none it
answered and opens none twice.

Real processes: remote_risk on SQLite, where the sends of one turn of its event loop share
one commit (:func:`member_kit.storage.engine.in_turn`), and sixteen clients sending at
once, each with a fresh token. The process is killed in the middle of that load and
started again on the same data directory. Every send it answered COMPLETED must have its
task in the database, and the same send made again (its idempotency key, a fresh token)
must be answered with that very task, never a second one.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agent_cards.identity import identity_of
from bench.loadgen import send_message_body
from bench.services import Issuer
from bench.tokens import TokenMinter
from tests.processes import RemoteRiskProcess

CLIENTS = 16
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def send(url: str, minter: TokenMinter, handoff_id: str) -> httpx.Response:
    headers = {**HEADERS, "Authorization": "Bearer " + minter.mint(handoff_id)}
    body = send_message_body(handoff_id)
    return httpx.post(url + "/a2a/jsonrpc", content=body, headers=headers, timeout=10)


def answered_task(response: httpx.Response) -> str | None:
    """The task id of a send answered COMPLETED, else None."""
    if response.status_code != 200:
        return None
    task = response.json().get("result", {}).get("task") or {}
    state = task.get("status", {}).get("state")
    return str(task["id"]) if state == "TASK_STATE_COMPLETED" else None


def stored_tasks(data_dir: Path) -> set[str]:
    with sqlite3.connect(f"file:{data_dir / 'remote-risk.db'}?mode=ro", uri=True) as connection:
        return {row[0] for row in connection.execute("SELECT id FROM remote_risk_tasks")}


def test_no_answered_send_is_lost_or_doubled_when_killed_mid_load(tmp_path: Path) -> None:
    issuer = Issuer.create(tmp_path)
    remote = RemoteRiskProcess(tmp_path / "remote", issuer.jwks_file)
    audience = identity_of(remote.keys.signing_key().verification_key())
    minter = TokenMinter(issuer.keys.active, audience)
    remote.start()
    answered: dict[str, str] = {}  # handoff id -> task id
    numbers, stop = itertools.count(), threading.Event()

    def client() -> None:
        while not stop.is_set():
            handoff_id = f"h-{next(numbers)}"
            try:
                task_id = answered_task(send(remote.listening_url, minter, handoff_id))
            except httpx.HTTPError:
                return  # the process is gone
            if task_id is not None:
                answered[handoff_id] = task_id

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            for _ in range(CLIENTS):
                pool.submit(client)
            time.sleep(1.5)
            remote.kill()
            stop.set()
        assert len(answered) > CLIENTS  # the kill came in the middle of the load
        assert set(answered.values()) <= stored_tasks(remote.data_dir)
        remote.start()
        for handoff_id, task_id in list(answered.items())[-CLIENTS * 2 :]:
            assert answered_task(send(remote.listening_url, minter, handoff_id)) == task_id
    finally:
        remote.stop()
