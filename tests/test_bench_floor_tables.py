"""The floors of bench.floor_tables do the member's work of a send, not less.

They are the rungs between the floor and remote_risk (docs/benchmarks.md, "The ladder"):
a rung that skipped a row or a check would flatter the goal. So each, started as the
bench starts it, must answer a send as remote_risk does (the task COMPLETED, its receipt
in the member's format, signed by the floor's key, binding that task's artifacts and
stating the log it was entered in), write one row to each table remote_risk writes a
send to (two to the decision log), and refuse a replayed token and a forged one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cards.keys import TrustedKeys
from agent_cards.transparency.receipts import artifact_digest, receipt_of, verified_receipt
from bench import services
from bench.loadgen import send_message_body
from bench.tokens import TokenMinter
from member_kit.trust.issuers import signing_keys

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
# Each table remote_risk writes a send to, and how many rows a send adds to it.
ROWS_A_SEND = {
    "remote_risk_tasks": 1,
    "remote_risk_idempotency_keys": 0,  # the task's row holds its key while it is stored
    "remote_risk_used_tokens": 1,  # the claim, its grant watched in the same row
    "remote_risk_audit_log": 2,
}
Floor = tuple[services.Running, TokenMinter]


@pytest.fixture(scope="module", params=[(), ("--models",)], ids=["plain", "models"])
def floor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Floor]:
    root = tmp_path_factory.mktemp("floor-tables")
    issuer = services.Issuer.create(root)
    with services.floor(root, issuer, "bench.floor_tables", *request.param) as running:
        yield running, TokenMinter(issuer.keys.active, running.audience)


def send(running: services.Running, token: str, body: bytes) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(running.url + "/a2a/jsonrpc", content=body, headers=headers, timeout=10)


def counts(data_dir: Path) -> dict[str, int]:
    with sqlite3.connect(data_dir / "floor-tables.db") as db:
        return {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ROWS_A_SEND}  # fmt: skip


def test_a_send_is_answered_with_the_members_receipt_and_rows(floor: Floor) -> None:
    running, minter = floor
    assert running.data_dir is not None
    before = counts(running.data_dir)
    answer = send(running, minter.mint("h-ok"), send_message_body("h-ok"))
    assert answer.status_code == 200
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][0]["taskId"] == task["id"] and task["artifacts"][0]["parts"]
    key = signing_keys(None, running.data_dir).signing_key().verification_key()
    claims = verified_receipt(receipt_of(task["metadata"]), TrustedKeys([key]))
    assert claims["task_id"] == task["id"] and claims["handoff_id"] == "h-ok"
    assert claims["artifact_digest"] == artifact_digest(task["artifacts"])
    assert claims["log_tree_size"] == before["remote_risk_audit_log"] + 2
    after = counts(running.data_dir)
    assert {table: after[table] - before[table] for table in after} == ROWS_A_SEND


def test_a_replayed_or_forged_token_is_refused_and_writes_nothing(floor: Floor) -> None:
    running, minter = floor
    assert running.data_dir is not None
    token = minter.mint("h-once")
    assert send(running, token, send_message_body("h-once")).status_code == 200
    before = counts(running.data_dir)
    assert send(running, token, send_message_body("h-once")).status_code == 409
    other = minter.mint("h-other").rsplit(".", 1)[1]
    forged = minter.mint("h-forged").rsplit(".", 1)[0] + "." + other
    assert send(running, forged, send_message_body("h-forged")).status_code == 401
    assert counts(running.data_dir) == before
