"""A submitted delegation under an ``Idempotency-Key``, on SQLite: one run per key.

The coordinator API on loopback (tests/coordinator/test_api.py's deployment, SQLite) and
a client sending the same submission again, and several at once, under one key, as a
client does that got no answer. Each is answered the one run the key created; the same
key with another request is refused. (On PostgreSQL, with the answer to the run's commit
lost: tests/coordinator/test_server_commit_lost.py.)
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from coordinator.storage.datadir import DataDir
from tests.coordinator.test_api import SKILL, TOKEN, deployed
from tests.processes import PAYLOAD

BODY = {"to": "remote-risk", "skill": SKILL, "input": PAYLOAD, "wait": False}


def test_one_key_is_one_run_sent_again_or_at_once(tmp_path: Path) -> None:
    with deployed(DataDir(tmp_path / "data")) as deployment:
        assert deployment.register().status_code == 200
        key = {"Idempotency-Key": str(uuid.uuid4())}

        def post(_: int) -> httpx.Response:
            headers = {"Authorization": f"Bearer {TOKEN}", **key}
            return httpx.post(
                deployment.api + "/v1/delegations", json=BODY, headers=headers, timeout=30
            )

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(post, range(8)))
        again = post(0)
        other = httpx.post(
            deployment.api + "/v1/delegations",
            json={**BODY, "timeout": 12.0},
            headers={"Authorization": f"Bearer {TOKEN}", **key},
            timeout=30,
        )
        listed = deployment.http.get("/v1/runs").json()["runs"]
    assert {a.status_code for a in [*answers, again]} == {202}, [a.text for a in answers]
    assert len({a.json()["run_id"] for a in [*answers, again]}) == 1
    assert len(listed) == 1
    assert other.status_code == 422
    assert other.json()["error"]["reason"] == "idempotency_key_reused"
