"""Where an operator got lost (issue 36, "paper cuts"): each finding, as it was met.

Real processes throughout: the coordinator's CLI as a subprocess, remote_risk as a
process or served on loopback, the coordinator's API on loopback.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import REDACTED, UNITS_EVENT, AuditEvent
from coordinator.cli.printers import print_delegation
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
from coordinator.workspace import Workspace
from tests.coordinator.test_api import TOKEN, Deployment, deployed
from tests.coordinator.test_reconcile_counterparty import one_run_to
from tests.processes import PAYLOAD, federation, registered

SKILL = "interpret-risk-policy"


def cli(data: DataDir | Path, *args: str, **env: str) -> tuple[int, str, str]:
    root = data.root if isinstance(data, DataDir) else data
    process = federation(root, *args, **env)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def one_error_line(err: str, reason: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"federation: error: {reason}: "), err
    return lines[0]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[DataDir]:
    with registered(tmp_path) as (data, _):
        yield data


def test_a_skill_typo_is_refused_before_any_run_exists(remote: DataDir, tmp_path: Path) -> None:
    """As an agent-name typo is: exit 2, one line naming the agent's skills, no run."""
    (tmp_path / "input.json").write_text(json.dumps(PAYLOAD))
    delegate = ("delegate", "--to", "remote-risk", "--input", str(tmp_path / "input.json"))
    status, _, err = cli(remote, *delegate, "--skill", "interpret-risk-polcy")
    assert status == 2
    assert SKILL in one_error_line(err, "unknown_skill")
    status, out, err = cli(remote, "runs", "--json")
    assert (status == 0 and json.loads(out)["runs"] == []) or "no_ledger" in err


def test_an_unknown_run_state_is_refused_with_the_valid_ones(
    remote: DataDir, tmp_path: Path
) -> None:
    """``runs --state acepted`` printed "no runs recorded" and exited 0."""
    (tmp_path / "input.json").write_text(json.dumps(PAYLOAD))
    delegate = ("delegate", "--to", "remote-risk", "--input", str(tmp_path / "input.json"))
    assert cli(remote, *delegate, "--skill", SKILL)[0] == 0
    status, _, err = cli(remote, "runs", "--state", "acepted")
    assert status == 2
    line = one_error_line(err, "bad_state")
    assert "accepted" in line and "live" in line and "finished" in line
    status, out, _ = cli(remote, "runs", "--state", "accepted")
    assert status == 0 and "ACCEPTED" in out


def test_a_skill_typo_through_the_api_records_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployment:
        assert deployment.register().status_code == 200
        body = {"to": "remote-risk", "skill": "nope", "input": PAYLOAD}
        answer = deployment.http.post("/v1/delegations", json=body)
        assert answer.status_code == 422
        assert answer.json()["error"]["reason"] == "unknown_skill"
        assert SKILL in answer.json()["error"]["message"]
        assert deployment.http.get("/v1/runs").json()["runs"] == []


def test_the_server_error_suggests_what_the_cli_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No token for --server: the hint names the variables, not a flag the CLI lacks."""
    for name in ("FEDERATION_OPERATOR_TOKEN", "FEDERATION_OPERATOR_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    status, _, err = cli(tmp_path, "--server", "http://127.0.0.1:9", "agents")
    line = one_error_line(err, "operator_token_missing")
    assert status == 2
    assert "FEDERATION_OPERATOR_TOKEN_FILE" in line and "--operator-token-file" not in line


def test_no_none_in_what_run_show_and_delegate_print(
    remote: DataDir, capsys: pytest.CaptureFixture[str]
) -> None:
    """``model_tokens None`` (a run that names no token limit) and ``verdict: None`` (a
    handoff whose answer was never judged) read as bugs: each says what it means."""
    run_id = one_run_to(remote, "remote-risk")
    status, out, _ = cli(remote, "run", "show", run_id)
    assert status == 0 and "None" not in out
    assert "model_tokens no limit" in out
    document: dict[str, Any] = {
        "run_id": run_id, "handoff_id": "ho-1", "target": "remote-risk",
        "remote_task_id": None, "remote_state": None, "local_state": "FAILED",
        "reason": "dispatch_failed:unreachable", "return_contract": {"kind": "finding"},
        "verdict": None, "notes": [], "artifacts": [], "received_artifacts": [],
    }  # fmt: skip
    print_delegation(document)
    printed = capsys.readouterr().out
    assert "None" not in printed and "verdict: none (no answer was judged)" in printed


def test_the_ledger_keeps_budget_numbers_and_still_hides_secrets(tmp_path: Path) -> None:
    """The redactor hid every key containing "token": the budget's ``model_tokens``
    vanished from the tamper-evident record. Secret fields are now a list."""
    engine = open_engine(DataDir(tmp_path))
    migrate(engine)
    data = {
        "budget": {"model_tokens": 4096, "model_requests": 2},
        "usage": {"total_tokens": 17, "prompt_tokens": 12},
        "with_token": True,
        "access_token": "tok-456",
        "Authorization": "Bearer sk-live-123",
        "X-Api-Key": "k-789",
        "note": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln",
    }
    stored = Ledger(engine).append(AuditEvent(event_type="t", actor="a", data=data))
    engine.dispose()
    assert stored.data["budget"] == {"model_tokens": 4096, "model_requests": 2}
    assert stored.data["usage"] == {"total_tokens": 17, "prompt_tokens": 12}
    assert stored.data["with_token"] is True
    assert [stored.data[k] for k in ("access_token", "Authorization", "X-Api-Key", "note")] == [
        REDACTED
    ] * 4


def test_a_run_keeps_its_token_budget_in_the_ledger(remote: DataDir) -> None:
    """Every unit of a real run is in the ledger, field for field as the run store keeps
    it, though none is an event of its own: they ride on the events that moved them."""
    run_id = one_run_to(remote, "remote-risk")
    status, out, _ = cli(remote, "audit", "show", run_id, "--json")
    assert status == 0
    view = json.loads(out)
    assert REDACTED not in out
    assert all("model_tokens" in row for row in view["budget"])
    assert [row["kind"] for row in view["budget"]] == ["reserved", "consumed", "released"]
    status, out, _ = cli(remote, "run", "show", run_id, "--json")
    assert status == 0 and json.loads(out)["budget"]["ledger"] == view["budget"]
    ws = Workspace(remote)
    try:
        assert UNITS_EVENT not in {event.event_type for event in ws.ledger().events(run_id)}
    finally:
        ws.close()


def test_a_delegation_shows_every_move_its_ledger_records(remote: DataDir, tmp_path: Path) -> None:
    """The moves to DISPATCHED, RETURNED and ACCEPTED are in the events that caused them
    (the dispatch, the remote state observed, the artifact's verdict), no
    ``handoff.transition`` of their own; the command line's progress still says each
    step, and ``audit show`` rebuilds the branch's state from the ledger alone."""
    (tmp_path / "input.json").write_text(json.dumps(PAYLOAD))
    delegate = ("delegate", "--to", "remote-risk", "--input", str(tmp_path / "input.json"))
    status, _, err = cli(remote, *delegate, "--skill", SKILL)
    assert status == 0, err
    steps = [line.split(": ", 1)[1] for line in err.splitlines() if "attempt 1" in line]
    assert steps[0].startswith("attempt 1 dispatched to http://127.0.0.1:"), err
    moved = [step.split(": ", 1)[1] for step in steps if " -> " in step]
    assert moved[-1] == "RETURNED -> ACCEPTED (finding_admitted)", err
    assert moved[-2].endswith("-> RETURNED (remote_completed)"), err
    status, out, _ = cli(remote, "runs", "--json")
    run_id = json.loads(out)["runs"][0]["run_id"]
    status, out, _ = cli(remote, "audit", "show", run_id, "--json")
    assert status == 0 and [b["state"] for b in json.loads(out)["branches"]] == ["ACCEPTED"]
    ws = Workspace(remote)
    try:
        events = ws.ledger().events(run_id)
    finally:
        ws.close()
    carried = {e.event_type: e.data["transition"]["to"] for e in events if "transition" in e.data}
    assert carried == {
        "message.dispatched": "DISPATCHED",
        "remote.state_observed": "RETURNED",
        "artifact.admitted": "ACCEPTED",
    }
    alone = [e.data["to"] for e in events if e.event_type == "handoff.transition"]
    assert not {"DISPATCHED", "RETURNED", "ACCEPTED"} & set(alone)  # RUNNING, if WORKING seen


def test_the_database_is_owner_only_as_the_keys_are(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    status, _, err = cli(data, "keys", "show")
    assert status == 0, err
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    status, _, err = cli(data, "recover")  # opens the database
    assert status == 0, err
    created = [p for p in data.iterdir() if p.name.startswith("federation.db")]
    assert data / "federation.db" in created
    for path in created:  # the database and SQLite's WAL files
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(DataDir(tmp_path / "other").ensure().stat().st_mode) == 0o700


def test_every_state_file_is_owner_only(tmp_path: Path) -> None:
    """Found following the README: agents.json was 0644 where the README says owner-only."""
    data = DataDir(tmp_path / "state")
    data.write_json({"remote-risk": {}}, "agents.json")
    data.write_json({"remote-risk": {}}, "agents.json")  # and when replaced
    assert stat.S_IMODE(data.path("agents.json").stat().st_mode) == 0o600


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with deployed(DataDir(tmp_path / "data")) as deployment:
        yield deployment


def test_an_unknown_path_is_404_and_a_protected_one_still_401(deployment: Deployment) -> None:
    """Unauthenticated: a path the service does not serve is 404 (not an auth problem);
    one it serves is 401 whatever comes after the route (a run that does not exist too),
    so a caller without the token learns nothing /openapi.json does not list."""
    for path in ("/nope", "/v1/nope", "/v1/runs/x/nope", "/console-not"):
        answer = httpx.get(deployment.api + path, timeout=10)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["error"]["reason"] == "not_found"
    for method, path in (("GET", "/v1/runs"), ("GET", "/v1/runs/run-nope"),
                         ("DELETE", "/v1/runs"), ("GET", "/metrics")):  # fmt: skip
        answer = httpx.request(method, deployment.api + path, timeout=10)
        assert answer.status_code == 401, (method, path, answer.text)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(deployment.api + "/v1/nope", headers=auth, timeout=10).status_code == 404


def test_metrics_count_the_runs_a_cli_process_drove(deployment: Deployment, tmp_path: Path) -> None:
    """A delegation driven by a CLI process on the same data directory: the per-process
    counter says in its HELP that it counts this process only; the recorded gauge,
    read from the database, counts it."""
    assert deployment.register().status_code == 200
    (tmp_path / "input.json").write_text(json.dumps(PAYLOAD))
    status, _, err = cli(
        deployment.data, "delegate", "--to", "remote-risk", "--skill", SKILL,
        "--input", str(tmp_path / "input.json"),
    )  # fmt: skip
    assert status == 0, err
    text = deployment.http.get("/metrics").text
    assert 'federation_handoffs_recorded{state="ACCEPTED"} 1.0' in text
    help_line = next(line for line in text.splitlines() if "HELP federation_handoffs_total" in line)
    assert "this process" in help_line and "federation_handoffs_recorded" in help_line


def test_audit_show_says_no_limit_and_runs_says_which_state_matched_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Found following the README: ``audit show`` printed ``model_tokens None`` where
    ``run show`` says ``no limit``, and ``runs --state live`` with runs recorded but none
    live printed ``no runs recorded``."""
    from coordinator.cli import printers

    authority = {"principal": "p", "tenant": "t", "scope": ["s"], "budget": {"model_tokens": None}}
    assert "model_tokens no limit" in printers.describe_authority(authority)
    printers.print_runs({"runs": [], "next_cursor": None}, as_json=False, state="live")
    assert capsys.readouterr().out.strip() == "no runs match --state live"
