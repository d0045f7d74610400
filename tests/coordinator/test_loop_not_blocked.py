"""A slow database never stalls the coordinator's other requests (issue 20, item 4).

`federation serve coordinator` on PostgreSQL, as a real process; another session holds
the ledger's append lock, so the durable point of a `wait: true` delegation has to wait
for it (seen in ``pg_stat_activity``). Meanwhile /livez and a run listing are answered
by the same process; once the lock goes, the delegation ends ACCEPTED.

On SQLite the durable points are committed on the event loop's own thread when nothing
waits (issue 34): another process holding the database's write lock must send them to
the writer's thread instead, never hold the loop for the busy timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.audit.log.chain import _APPEND_LOCK_CLASS as APPEND_LOCK_CLASS
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import PAYLOAD, federation, wait_for
from tests.servers import free_port, running

TOKEN = "operator-token-for-tests-0123456789"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}
# The ledger's advisory lock (coordinator/audit/log/chain.py): class and key of one schema.
APPEND_LOCK = f"SELECT pg_advisory_xact_lock({APPEND_LOCK_CLASS}, hashtext(current_schema()))"
WAITING_ON_IT = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
    "AND wait_event = 'advisory' AND pid <> pg_backend_pid()"
)


@pytest.fixture
def coordinator(tmp_path: Path, postgres_url: str) -> Iterator[str]:
    """remote_risk registered in a data directory, and `serve coordinator` over it with its
    state in a fresh PostgreSQL schema; the coordinator's URL."""
    yield from _serving(tmp_path, ("--database-url", postgres_url))


@pytest.fixture
def sqlite_coordinator(tmp_path: Path) -> Iterator[str]:
    """The same, its state in the data directory's SQLite database."""
    yield from _serving(tmp_path, ())


def _serving(tmp_path: Path, database: tuple[str, ...]) -> Iterator[str]:
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
    )
    app = create_app(settings)
    with running(app, port=port) as url:

        async def register() -> None:
            pins = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
            declared = {RISK_SKILL: finding_contract(source="registration")}
            async with A2AClient() as client:
                await Registry(data).register(client, url, anchor=pins, return_contracts=declared)

        asyncio.run(register())
        process = federation(
            data.root,
            *database,
            "serve",
            "coordinator",
            "--port",
            "0",
            FEDERATION_OPERATOR_TOKEN=TOKEN,
        )
        try:
            assert process.stdout is not None
            base = process.stdout.readline().strip().rsplit(" ", 1)[1]
            assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
            yield base
        finally:
            process.terminate()
            process.communicate(timeout=30)


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _delegating(coordinator: str) -> tuple[threading.Thread, dict[str, Any]]:
    """A `wait: true` delegation to remote-risk, sent from a thread; its answer, once in."""
    answer: dict[str, Any] = {}

    def delegate() -> None:
        body = {"to": "remote-risk", "skill": RISK_SKILL, "input": PAYLOAD, "wait": True}
        reply = httpx.post(f"{coordinator}/v1/delegations", json=body, headers=AUTHORIZED,
                           timeout=120)  # fmt: skip
        answer.update(status=reply.status_code, body=reply.json())

    driving = threading.Thread(target=delegate)
    driving.start()
    return driving, answer


def test_livez_answers_while_a_durable_point_waits_on_the_database(
    coordinator: str, postgres_url: str
) -> None:
    with (
        psycopg.connect(_libpq(postgres_url)) as holder,
        psycopg.connect(_libpq(postgres_url), autocommit=True) as watcher,
    ):
        holder.execute(APPEND_LOCK)  # held until this transaction ends
        driving, answer = _delegating(coordinator)

        def blocked() -> bool:
            row = watcher.execute(WAITING_ON_IT).fetchone()
            return bool(row and row[0])

        wait_for(blocked, 60, "the delegation's durable point to wait on the ledger lock")
        live = httpx.get(f"{coordinator}/livez", timeout=30)
        listed = httpx.get(f"{coordinator}/v1/runs", headers=AUTHORIZED, timeout=30)
        assert live.status_code == 200 and listed.status_code == 200
        assert driving.is_alive() and blocked()  # still waiting: answered meanwhile
        holder.rollback()  # the lock goes
    driving.join(timeout=120)
    assert answer["status"] == 200
    assert answer["body"]["local_state"] == "ACCEPTED"


def test_on_sqlite_livez_answers_while_another_process_holds_the_write_lock(
    sqlite_coordinator: str, tmp_path: Path
) -> None:
    holder = sqlite3.connect(tmp_path / "data" / "federation.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, until this transaction ends
        driving, answer = _delegating(sqlite_coordinator)
        time.sleep(1.0)  # the delegation's writes are waiting for the lock by now
        for _ in range(3):
            started = time.monotonic()
            live = httpx.get(f"{sqlite_coordinator}/livez", timeout=10)
            listed = httpx.get(f"{sqlite_coordinator}/v1/runs", headers=AUTHORIZED, timeout=10)
            assert live.status_code == 200 and listed.status_code == 200
            assert time.monotonic() - started < 5.0  # not held for the busy timeout
        assert driving.is_alive()  # still waiting on the lock: answered meanwhile
    finally:
        holder.rollback()  # the lock goes
        holder.close()
    driving.join(timeout=120)
    assert answer["status"] == 200
    assert answer["body"]["local_state"] == "ACCEPTED"
