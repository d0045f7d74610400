"""An agent that is down ends ``unreachable``, within the documented retry window.

remote_risk is registered, then killed: ``federation delegate`` (a process of its own)
retries the send while the window allows, reporting each retry with its cause, and ends
FAILED ``dispatch_failed:unreachable`` with exit 3 (the exit-code table's "a remote is
unavailable"), never as a budget problem; ``runs`` and ``run show`` give the same first
cause, and the ledger's retries stay within the window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.cli.main import main
from coordinator.dispatch.retry import UNREACHABLE_RETRY_SECONDS
from coordinator.workspace import Workspace
from tests.coordinator.test_cancel import ENV_NAMES
from tests.coordinator.test_live_views import Delegate
from tests.processes import registered

UNREACHABLE = "dispatch_failed:unreachable"


def test_a_down_agent_ends_unreachable_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    with registered(tmp_path) as (data, remote):
        remote.kill()
        delegate = Delegate(data.root, "--json")
        code, out = delegate.finish()
    document = json.loads(out)
    assert code == 3, (out, delegate.lines)
    assert document["local_state"] == "FAILED" and document["reason"] == UNREACHABLE
    steps = [json.loads(line) for line in delegate.lines if line.startswith("{")]
    retries = [s for s in steps if s["event"] == "handoff.retry_scheduled"]
    assert retries and all(s["cause"] == UNREACHABLE for s in retries), steps
    assert steps[-1]["event"] == "run.disposition" and steps[-1]["status"] == "failed"
    [stopped] = [s for s in steps if s["event"] == "handoff.retries_stopped"]
    assert stopped["first_cause"] == UNREACHABLE and "retry window" in stopped["cause"]
    # the ledger's waits between attempts stay within the documented window
    events = Workspace(data).ledger().events(document["run_id"])
    waits = [e.data["delay_seconds"] for e in events if e.event_type == "handoff.retry_scheduled"]
    assert sum(waits) <= UNREACHABLE_RETRY_SECONDS
    assert not [e for e in events if e.data.get("reason") == "over_budget"]
    capsys.readouterr()
    assert main(["--data-dir", str(data.root), "runs", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["runs"]
    assert (row["state"], row["reason"]) == ("FAILED", UNREACHABLE)
