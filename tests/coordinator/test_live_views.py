"""A delegation driven by a ``federation delegate`` process is live in every view while it runs.

The handoff is driven by the CLI as a process of its own against a slow remote_risk; the
views are the command line's (``runs``, ``run show``), the API's (``GET /v1/runs``, the
run document the console renders, ``/metrics``) on the same database. Each must say
``live`` with the run's target, its branch, the remote task id and state while the
remote works, and the run is cancelled from another shell. The delegate process reports
as it goes: its run id at once, then a line per step, on standard error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli.main import main
from coordinator.storage.datadir import DataDir
from tests.coordinator.test_api import PAYLOAD, SKILL, deployed
from tests.coordinator.test_cancel import ENV_NAMES, live_task

SLOW_SECONDS = 60.0


class Delegate:
    """``federation delegate`` in a process of its own; its standard error read as it
    comes (the progress lines), its standard output (the document) at the end."""

    def __init__(self, data: Path, *extra: str) -> None:
        input_file = data.parent / "input.json"
        input_file.write_text(json.dumps(PAYLOAD))
        env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
        argv = [str(Path(sys.executable).with_name("federation")), "--data-dir", str(data)]
        argv += ["delegate", "--to", "remote-risk", "--skill", SKILL, "--input", str(input_file)]
        pipe = subprocess.PIPE
        self.process = subprocess.Popen(
            [*argv, *extra], stdout=pipe, stderr=pipe, text=True, env=env
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def finish(self) -> tuple[int, str]:
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        return self.process.returncode, out


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_cli_driven_delegation_is_live_everywhere_and_cancellable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data"), skill_delay_seconds=SLOW_SECONDS) as d:
        assert d.register().status_code == 200
        delegate = Delegate(d.data)
        run_id, task_id = live_task(d.data, delegate.process)
        local = ["--data-dir", str(d.data)]
        [listed] = [r for r in cli_json(capsys, *local, "runs")["runs"] if r["run_id"] == run_id]
        [api_listed] = [r for r in d.http.get("/v1/runs").json()["runs"] if r["run_id"] == run_id]
        for row in (listed, api_listed):
            assert row["state"] == "live", row
            assert row["targets"] == ["remote-risk"] and row["branches"] == 1, row
            assert row["live_branches"] == 1, row
        # the API's metrics count it, though another process drives it
        scraped = d.http.get("/metrics").text
        assert "federation_runs_live 1.0" in scraped, scraped
        shown = cli_json(capsys, *local, "run", "show", run_id)
        api_shown = d.http.get(f"/v1/runs/{run_id}").json()
        for document in (shown, api_shown):
            [branch] = document["branches"]
            assert branch["live"] and branch["target"] == "remote-risk", branch
            assert branch["remote_task_id"] == task_id, branch
            assert branch["remote_state"] == "TASK_STATE_WORKING", branch
            assert document["live_branches"] == [branch["branch"]]
            assert document["remote_task_id"] == task_id
        # the run id came at once, then the steps, while the remote still works
        assert any(run_id in line for line in delegate.lines[:1]), delegate.lines
        assert any(task_id in line for line in delegate.lines), delegate.lines
        # cancelled from another shell; the delegate process says so and ends
        capsys.readouterr()
        assert main([*local, "cancel", run_id, "--reason", "seen live"]) == 0
        code, out = delegate.finish()
        assert code == 1, delegate.lines
        assert "CANCELLED" in out
        assert any("CANCELLED" in line for line in delegate.lines), delegate.lines
        after = d.http.get("/v1/runs", params={"state": "cancelled"}).json()["runs"]
        assert [row["run_id"] for row in after] == [run_id]
