"""Cancelling a run: by command, through the API and by Ctrl-C, against a slow remote_risk.

The handoff is driven by another process than the one that cancels it (a ``delegate``
process, or the API's worker), so the cancel is committed in the shared database and the
remote task is cancelled under a token minted for the same handoff attempt. Each test
checks the remote's own task store (TASK_STATE_CANCELED), the handoff (CANCELLED, with
who and why in the run's document and the ledger) and that nothing was admitted after.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from coordinator.audit.log.events import transition_in
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.cli.main import main
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.coordinator.test_api import PAYLOAD, SKILL, TOKEN, deployed
from tests.servers import free_port, running

SKILL_DELAY_SECONDS = 4.0
ENV_NAMES = (
    "FEDERATION_SERVER",
    "FEDERATION_OPERATOR_TOKEN",
    "FEDERATION_OPERATOR_TOKEN_FILE",
    "FEDERATION_ISSUER",
    "FEDERATION_DATABASE_URL",
    "FEDERATION_DATA_DIR",
)


@dataclass
class Slow:
    data: Path
    risk_app: FastAPI
    input_file: Path

    def remote_state(self, task_id: str) -> str:
        """The task's state as the remote itself holds it."""
        record = self.risk_app.state.task_store._records[task_id]
        return str(record.snapshot().status.state.value)


@pytest.fixture
def slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Slow]:
    """A data directory whose coordinator keys a slow remote_risk trusts, registered."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    data = DataDir(tmp_path / "data")
    keys = coordinator_keys(data)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        skill_delay_seconds=SKILL_DELAY_SECONDS,
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
    )
    app = create_app(settings)
    with running(app, port=port) as url:

        async def register() -> None:
            anchor = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
            async with A2AClient() as client:
                await Registry(data).register(client, url, anchor=anchor)

        asyncio.run(register())
        input_file = tmp_path / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        yield Slow(data.root, app, input_file)


def start_delegate(slow: Slow, **env_extra: str) -> subprocess.Popen[str]:
    """``federation delegate`` in a process of its own, as an operator would run it."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES} | env_extra
    argv = [str(Path(sys.executable).with_name("federation")), "--data-dir", str(slow.data)]
    argv += ["delegate", "--to", "remote-risk", "--skill", SKILL, "--input", str(slow.input_file)]
    argv += ["--json"]
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True, env=env)


def live_task(data: Path, process: subprocess.Popen[str] | None = None) -> tuple[str, str]:
    """``(run_id, remote_task_id)`` once the run's handoff is working at the remote."""
    store = Workspace(DataDir(data)).run_store()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process is None or process.poll() is None, process.communicate()
        for _, run_id, _ in store.run_page(5):
            for record in store.run_records(run_id):
                if record.remote_task_id and record.remote_state == "TASK_STATE_WORKING":
                    return run_id, record.remote_task_id
        time.sleep(0.05)
    raise AssertionError("the handoff never reached the remote")


def assert_cancelled(slow: Slow, run_id: str, task_id: str, by: str, why: str) -> None:
    """Remote CANCELED, handoff CANCELLED with who and why, nothing admitted, even after
    the time the remote's skill would have taken."""
    time.sleep(SKILL_DELAY_SECONDS / 2)
    assert slow.remote_state(task_id) == "TASK_STATE_CANCELED"
    ws = Workspace(DataDir(slow.data))
    [record] = ws.run_store().run_records(run_id)
    assert record.state.value == "CANCELLED"
    document = ws.run_store().run(run_id)
    assert document is not None
    assert document["document"]["cancellation"]["by"] == by
    assert document["document"]["cancellation"]["reason"] == why
    events = ws.ledger().events(run_id)
    kinds = [event.event_type for event in events]
    assert "artifact.admitted" not in kinds
    moves = [transition_in(e.event_type, e.data) for e in events]
    assert not any(move and move["to"] == "ACCEPTED" for move in moves)
    [cancelled] = [e for e in events if e.event_type == "run.cancelled"]
    assert cancelled.data["by"] == by and cancelled.data["why"] == why
    # audit show, the run rebuilt from the ledger alone, says who and why too
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert main(["--data-dir", str(slow.data), "audit", "show", run_id]) == 0
    assert f"cancelled by {by} at " in shown.getvalue() and why in shown.getvalue()


def test_cancel_by_command_stops_a_delegate_process(
    slow: Slow, capsys: pytest.CaptureFixture[str]
) -> None:
    """`federation cancel` from another process: the delegate process notices, the remote
    task ends CANCELED and the delegate never accepts the result."""
    process = start_delegate(slow)
    run_id, task_id = live_task(slow.data, process)
    code = main(["--data-dir", str(slow.data), "cancel", run_id, "--reason", "wrong brief"])
    shown = capsys.readouterr().out
    assert code == 0, shown
    assert "TASK_STATE_CANCELED" in shown and "wrong brief" in shown
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, err
    document = json.loads(out)
    assert document["local_state"] == "CANCELLED"
    assert document["cancellation"]["reason"] == "wrong brief"
    assert_cancelled(slow, run_id, task_id, "operator (command line)", "wrong brief")


def test_cancel_through_the_api_stops_the_worker(tmp_path: Path) -> None:
    """`POST /v1/runs/{id}/cancel` on a serving coordinator whose worker drives the run."""
    with deployed(DataDir(tmp_path / "data"), skill_delay_seconds=SKILL_DELAY_SECONDS) as d:
        assert d.register().status_code == 200
        submitted = d.delegate(wait=False).json()
        run_id, task_id = live_task(d.data)
        assert run_id == submitted["run_id"]
        answer = d.http.post(f"/v1/runs/{run_id}/cancel", json={"reason": "not needed"})
        assert answer.status_code == 200, answer.text
        document = answer.json()
        [branch] = document["branches"]
        assert branch["state"] == "CANCELLED"
        assert branch["remote_state"] == "TASK_STATE_CANCELED"
        assert document["cancelled"] is True
        slow = Slow(d.data, d.risk_app, tmp_path / "unused")
        assert_cancelled(slow, run_id, task_id, "operator (api)", "not needed")
        again = d.http.get(f"/v1/runs/{run_id}").json()
        assert again["branches"][0]["state"] == "CANCELLED" and not again["live_branches"]
        # A run with nothing live left is not cancelled twice, and an unknown one is 404.
        finished = d.delegate().json()
        refused = d.http.post(f"/v1/runs/{finished['run_id']}/cancel", json={})
        assert refused.status_code == 409 and refused.json()["error"]["reason"] == "run_ended"
        assert d.http.post("/v1/runs/run-nope/cancel").status_code == 404


def test_cancel_through_the_server_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`federation --server URL cancel` is the same command over the API."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data"), skill_delay_seconds=SKILL_DELAY_SECONDS) as d:
        assert d.register().status_code == 200
        d.delegate(wait=False)
        run_id, _ = live_task(d.data)
        monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", TOKEN)
        code = main(["--server", d.api, "cancel", run_id, "--json"])
        assert code == 0
        stored = Workspace(DataDir(d.data)).run_store().run(run_id)
        assert stored is not None
        assert stored["document"]["cancellation"]["reason"] == "no reason given"


def test_ctrl_c_on_delegate_cancels_its_run(slow: Slow) -> None:
    """One Ctrl-C: the run is cancelled the same way, the process says so and exits 130."""
    process = start_delegate(slow)
    run_id, task_id = live_task(slow.data, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"cancelled run {run_id}" in err
    document: dict[str, Any] = json.loads(out)
    assert document["local_state"] == "CANCELLED"
    assert document["remote_state"] == "TASK_STATE_CANCELED"
    assert_cancelled(slow, run_id, task_id, "operator (interrupt)", "interrupted (Ctrl-C)")


def test_api_documents_the_cancel_route(tmp_path: Path) -> None:
    with deployed(DataDir(tmp_path / "data")) as d:
        schema = httpx.get(f"{d.api}/openapi.json").json()
        route = schema["paths"]["/v1/runs/{run_id}/cancel"]["post"]
        assert {"200", "404", "409"} <= set(route["responses"])


def test_second_ctrl_c_leaves_the_run_to_recovery_and_names_the_command(
    slow: Slow, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second Ctrl-C while the first cancel is under way: the process stops without
    waiting, names `federation cancel RUN`, and that command finishes the cancel."""
    marker = slow.data.parent / "paused"
    process = start_delegate(
        slow, FEDERATION_PAUSE_AT="before_cancel_task", FEDERATION_PAUSE_MARKER=str(marker)
    )
    run_id, task_id = live_task(slow.data, process)
    process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 30
    while not marker.exists():  # the first cancel is committed; CancelTask not yet sent
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"federation cancel {run_id}" in err, err
    assert main(["--data-dir", str(slow.data), "cancel", run_id, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["branches"][0]["state"] == "CANCELLED"
    assert slow.remote_state(task_id) == "TASK_STATE_CANCELED"
