"""A running coordinator whose commit of a submitted delegation lands, its answer lost.

Real processes: ``federation serve coordinator`` with its database on PostgreSQL, reached
through a link that loses the answer to one COMMIT (tests/commit_cut.py), and a
registered remote_risk. A delegation is submitted (``"wait": false``) under an
``Idempotency-Key``; the COMMIT cut is the one that creates its run, which PostgreSQL
committed. The server saw its connection lost; it looks the key up and finds the run
committed after all, so it answers that run (202), or, had it not been able to look, 503
``storage_unavailable`` with ``Retry-After``, and the client sends the same request under
the same key and is answered that run. Either way one run, not two, for one request, and
it ends ACCEPTED, driven at once: the lease on its handoff that the failed request held is
let go, not waited out. (Before, there was no key: the answer was 503 for a run that existed,
and the retry it invites made a second run and a second remote task.) The same key with
another request is refused 422 ``idempotency_key_reused``; a key on a request driven in
place (``"wait": true``) 400 ``idempotency_key_invalid``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from coordinator.handoff.book import HandoffBook
from tests.commit_cut import CommitCut, cut_link
from tests.coordinator.conftest import postgres_server, postgres_url
from tests.coordinator.test_storage_faults import AUTHORIZED, DELEGATION, TOKEN, run_state, submit
from tests.processes import registered, wait_for

__all__ = ["cut_link", "postgres_server", "postgres_url"]
BODY = {**DELEGATION, "wait": False}
SUBMISSION_LEASE = HandoffBook.driver_lease_seconds  # what a submitting request holds


def serve(data_root: Path, url: str) -> subprocess.Popen[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    env = {
        **inherited,
        "FEDERATION_DATA_DIR": str(data_root),
        "FEDERATION_OPERATOR_TOKEN": TOKEN,
        "FEDERATION_DATABASE_URL": url,
    }
    command = [sys.executable, "-m", "coordinator", "serve", "coordinator", "--port", "0"]
    return subprocess.Popen(
        [*command, "--worker-lease-seconds", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def accepted(client: httpx.Client, answer: httpx.Response) -> str:
    assert answer.status_code == 202, answer.text
    run_id: str = answer.json()["run_id"]
    wait_for(lambda: run_state(client, run_id) == "ACCEPTED", 60, f"run {run_id} accepted")
    return run_id


def reason(answer: httpx.Response) -> str:
    return str(answer.json()["error"]["reason"])


def runs(client: httpx.Client) -> set[str]:
    return {run["run_id"] for run in client.get("/v1/runs", params={"limit": 200}).json()["runs"]}


def test_a_submission_whose_commit_answer_is_lost_is_one_run_under_its_key(
    tmp_path: Path, cut_link: tuple[str, CommitCut]
) -> None:
    url, cut = cut_link
    with registered(tmp_path) as (data, _remote):
        process = serve(data.root, url)
        try:
            assert process.stdout is not None
            first = process.stdout.readline().strip()
            assert first.startswith("coordinator listening on "), first
            base = first.rsplit(" ", 1)[1]
            with httpx.Client(base_url=base, headers=AUTHORIZED, timeout=30) as client:
                accepted(client, submit(client))  # the schema made, the link warm
                before = runs(client)
                keyed = {"Idempotency-Key": f'"{uuid.uuid4()}"'}
                cut.arm(b"INSERT INTO audit_events")
                answer = client.post("/v1/delegations", json=BODY, headers=keyed)
                assert cut.cuts == 1
                if answer.status_code == 503:  # as a client told to, under the same key
                    time.sleep(int(answer.headers["Retry-After"]))
                    answer = client.post("/v1/delegations", json=BODY, headers=keyed)
                answered = time.monotonic()
                run_id = accepted(client, answer)
                # driven at once: the lease the failed request held is let go, not waited out
                assert time.monotonic() - answered < SUBMISSION_LEASE / 2
                assert runs(client) - before == {run_id}  # one run for the one request
                repeated = client.post("/v1/delegations", json=BODY, headers=keyed)
                assert repeated.status_code == 202 and repeated.json()["run_id"] == run_id
                other = {**BODY, "timeout": 20.0}
                reused = client.post("/v1/delegations", json=other, headers=keyed)
                assert (reused.status_code, reason(reused)) == (422, "idempotency_key_reused")
                driven = client.post("/v1/delegations", json={**BODY, "wait": True}, headers=keyed)
                assert (driven.status_code, reason(driven)) == (400, "idempotency_key_invalid")
        finally:
            process.terminate()
            process.wait(timeout=30)
