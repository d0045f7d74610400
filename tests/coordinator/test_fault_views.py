"""After a fault, every view of a run says what the ledger says.

A delegation is driven by ``federation delegate`` (a process of its own) against a real
remote_risk process, through three faults: the remote down at send (back before the retry
window ends), the remote killed and restarted while it works, and the coordinator killed
mid-run (continued by ``federation recover``). Afterwards ``runs``, ``run show`` and the
API's run document are compared with ``federation audit show`` (the run rebuilt from the
ledger alone): the same branches, in the same states, with the same remote tasks, and a
run state that no branch of the ledger contradicts.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.coordinator.served import TOKEN as SERVED_TOKEN
from tests.coordinator.served import served
from tests.coordinator.test_api import PAYLOAD, SKILL, TOKEN
from tests.coordinator.test_cancel import ENV_NAMES, live_task
from tests.coordinator.test_live_views import Delegate, cli_json
from tests.processes import federation, registered, wait_for
from tests.servers import running


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def run_id_of(delegate: Delegate) -> str:
    wait_for(lambda: bool(delegate.lines), 60, "the delegate's first line")
    return str(json.loads(delegate.lines[0])["run_id"])


def api_document(data: DataDir, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The API's run document and its row in ``GET /v1/runs``."""
    ws = Workspace(data)
    with running(create_api(ws, CoordinatorSettings(operator_token=TOKEN))) as api:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=api, headers=headers, trust_env=False, timeout=60) as http:
            document = http.get(f"/v1/runs/{run_id}").json()
            [row] = [r for r in http.get("/v1/runs").json()["runs"] if r["run_id"] == run_id]
    ws.close()
    return document, row


def assert_views_agree(data: DataDir, run_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Every view against the ledger's reconstruction; the run's state, agreed."""
    local = ["--data-dir", str(data.root)]
    ledger = cli_json(capsys, *local, "audit", "show", run_id)
    audited = {b["branch"]: b for b in ledger["branches"]}
    shown = cli_json(capsys, *local, "run", "show", run_id)
    [listed] = [r for r in cli_json(capsys, *local, "runs")["runs"] if r["run_id"] == run_id]
    api_shown, api_listed = api_document(data, run_id)
    for document in (shown, api_shown):
        branches = {b["branch"]: b for b in document["branches"]}
        assert set(branches) == set(audited), (branches, audited)
        for name, branch in branches.items():
            assert branch["state"] == audited[name]["state"], (branch, audited[name])
            assert branch["remote_task_id"] == audited[name]["remote_task_id"], name
        assert document["live_branches"] == ledger["live_branches"]
    accepted = [b for b in audited.values() if b["state"] == "ACCEPTED"]
    state = "ACCEPTED" if accepted else shown["local_state"]
    for view in (shown, api_shown):
        assert view["local_state"] == state, (view["local_state"], ledger)
    # A run left with a branch in flight (a retry admitted as its process stopped) is
    # listed as live; an ended one by its state.
    word = "live" if ledger["live_branches"] else state
    assert listed == api_listed and listed["state"] == word, (listed, ledger)
    return state


def test_remote_down_at_send_then_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with registered(tmp_path) as (data, remote):
        remote.kill()
        delegate = Delegate(data.root, "--json")
        run_id = run_id_of(delegate)
        wait_for(lambda: any("retry_scheduled" in line for line in delegate.lines), 60, "a retry")
        remote.start()
        code, _ = delegate.finish()
        state = assert_views_agree(data, run_id, capsys)
    assert (code, state) in ((0, "ACCEPTED"), (3, "FAILED")), delegate.lines


def test_remote_restarted_mid_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with registered(tmp_path, "--skill-delay-seconds", "3") as (data, remote):
        delegate = Delegate(data.root, "--json", "--timeout", "60")
        run_id, _ = live_task(data.root, delegate.process)
        remote.kill()
        time.sleep(0.5)  # the coordinator's next poll finds nothing listening
        remote.start()
        delegate.finish()
        assert_views_agree(data, run_id, capsys)


def test_coordinator_killed_mid_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with registered(tmp_path, "--skill-delay-seconds", "3") as (data, _):
        delegate = Delegate(data.root, "--json", "--timeout", "60")
        run_id, _ = live_task(data.root, delegate.process)
        delegate.process.send_signal(signal.SIGKILL)
        delegate.finish()
        recovered = federation(data.root, "recover")
        out, err = recovered.communicate(timeout=120)
        assert recovered.returncode == 0, err
        assert assert_views_agree(data, run_id, capsys) == "ACCEPTED", out


def test_remote_down_and_back_under_the_api_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same fault for a delegation the API's workers drive (``serve coordinator``),
    read by a poller of the API, which never reads the run as ended before it is: while a
    retry waits out its delay the run has a live branch (its next attempt, admitted), and
    once it reads no live branch every later read says the same state. Before, each delay
    read as FAILED with nothing pending and the run then went on to ACCEPTED; a server
    stopped at such a moment left the next attempt in flight, and the views disagreed."""
    with registered(tmp_path) as (data, remote):
        remote.kill()
        with served(tmp_path, FEDERATION_DATA_DIR=str(data.root)) as server:
            headers = {"Authorization": f"Bearer {SERVED_TOKEN}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                body = {"to": "remote-risk", "skill": SKILL, "input": PAYLOAD, "wait": False}
                run_id = http.post("/v1/delegations", json=body).json()["run_id"]
                seen = poll_until_it_ends(http, run_id, then=remote.start)
        ended = [state for state, live in seen if not live]
        assert ended and set(ended) == {ended[-1]}, seen
        assert_views_agree(data, run_id, capsys)


def poll_until_it_ends(
    http: httpx.Client, run_id: str, then: Any, patience: float = 90.0
) -> list[tuple[str, bool]]:
    """Each read of the run (its state, whether a branch is live) until it has read as
    ended for two seconds; ``then`` is called once the third attempt exists (two retries
    have waited out their delays by then)."""
    seen: list[tuple[str, bool]] = []
    started, quiet_since, called = time.monotonic(), None, False
    while time.monotonic() - started < patience:
        document = http.get(f"/v1/runs/{run_id}").json()
        live = bool(document["live_branches"])
        seen.append((document["local_state"], live))
        if not called and len(document["branches"]) > 2:
            then()
            called = True
        quiet_since = None if live else (quiet_since or time.monotonic())
        if quiet_since is not None and time.monotonic() - quiet_since > 2.0:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"the run did not end in {patience} s: {seen[-5:]}")
