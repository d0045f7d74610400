"""Every way a run starts leaves a run that `runs`, `run show` and `audit show` know.

The observed gap: a model-supervised run was built without a trail or a store, so it was
missing from `federation runs` and `audit show` answered `unknown_run`. Each test here
starts a run through one real entry point (the CLI as a process where it can) and then
asks the same three views.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from coordinator.audit.trail import AuditTrail
from coordinator.cli.main import main
from coordinator.cli.printers import render_document, render_reconstruction
from coordinator.dispatch.delegate import DelegationOrder
from coordinator.errors import UnauditedRun
from coordinator.handoff.run import Run
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.facade import CoordinatorService
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.model_server import asks, says, scripted_model
from tests.runs import scratch_workspace
from tests.scenarios import Scenario
from tests.servers import free_port, running


def federation(data: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    base = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FEDERATION_MODEL", "REMOTE_RISK_MODEL", "FEDERATION_SERVER"))
    }
    completed = subprocess.run(
        [sys.executable, "-m", "coordinator", "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**base, **(env or {})},
    )
    assert completed.returncode in (0, 1), completed.stderr
    return completed


def view(data: Path, *args: str) -> Any:
    """One read-only view, the CLI's entry point run in this process: the runs were started
    by the CLI as a process, and what is checked here is what the views say of them."""
    out = io.StringIO()
    with mock.patch.dict(os.environ), redirect_stdout(out):
        for key in [key for key in os.environ if key.startswith("FEDERATION_SERVER")]:
            del os.environ[key]
        code = main(["--data-dir", str(data), *args, "--json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


def views(data: Path) -> list[dict[str, Any]]:
    """For every recorded run: its document, and its reconstruction from the ledger."""
    runs = view(data, "runs")["runs"]
    seen = []
    for summary in runs:
        document = view(data, "run", "show", summary["run_id"])
        shown = view(data, "audit", "show", summary["run_id"])
        assert document["run_id"] == shown["run_id"] == summary["run_id"]
        assert shown["disposition"] is not None, "every finished run records its disposition"
        render_document(document)
        render_reconstruction(shown)
        seen.append({"summary": summary, "document": document, "ledger": shown})
    return seen


def test_a_run_without_a_ledger_cannot_be_built() -> None:
    """The structural guarantee: a Run refuses an audit trail that writes nowhere."""
    with pytest.raises(UnauditedRun) as refused:
        Run(owner="coordinator", trail=AuditTrail(), store=scratch_workspace().run_store())
    assert refused.value.reason == "run_unaudited"


def test_demo_runs_are_listed_shown_and_in_the_ledger(tmp_path: Path) -> None:
    federation(tmp_path, "demo", "--case", "ok", "--json")
    (only,) = views(tmp_path)
    assert only["summary"]["kind"] == "pilot"
    assert only["ledger"]["disposition"]["status"] == "ready_for_draft"


def test_a_model_supervised_demo_run_is_audited(tmp_path: Path) -> None:
    """`demo --model` (a scripted model on loopback): the supervised run is in the views."""
    with scripted_model([asks("operations", "risk"), says("Consistent.")]) as model:
        env = {
            "FEDERATION_MODEL_BASE_URL": model.base_url,
            "FEDERATION_MODEL": "scripted",
            "FEDERATION_MODEL_API_KEY": "placeholder-not-a-key",
        }
        completed = federation(tmp_path, "demo", "--model", "--case", "ok", "--json", env=env)
    assert json.loads(completed.stdout)["cases"][0]["status"] == "completed"
    (only,) = views(tmp_path)
    assert only["summary"]["kind"] == "supervised"
    assert only["document"]["supervision"] == "completed"
    assert only["ledger"]["disposition"]["status"] == "ready_for_draft"
    assert len(only["ledger"]["branches"]) == 2


def test_a_supervised_run_that_fails_is_audited_too(tmp_path: Path) -> None:
    """A model that answers before consulting anyone ends the run failed, and on the record."""
    with scripted_model([says("Approved.")]) as model:
        env = {
            "FEDERATION_MODEL_BASE_URL": model.base_url,
            "FEDERATION_MODEL": "scripted",
            "FEDERATION_MODEL_API_KEY": "placeholder-not-a-key",
        }
        federation(tmp_path, "demo", "--model", "--case", "ok", "--json", env=env)
    (only,) = views(tmp_path)
    assert only["document"]["supervision"] == "failed"
    assert only["ledger"]["disposition"]["reason"] == "final_before_observations"


def test_every_federated_evaluation_run_is_audited(offline_evaluation: Scenario) -> None:
    """`evaluate`: the two federated configurations x four cases are eight recorded runs."""
    assert offline_evaluation.returncode in (0, 1), offline_evaluation.stderr
    seen = views(offline_evaluation.data)
    assert len(seen) == 8
    assert {s["ledger"]["disposition"]["case"] for s in seen} == {
        "ok",
        "missing",
        "conflict",
        "handoff",
    }


def test_a_submitted_run_has_a_complete_document_while_live(tmp_path: Path) -> None:
    """A run admitted for the workers (nothing driven yet) already answers every view."""
    data = DataDir(tmp_path / "data")
    port = free_port()
    app = create_app(Settings(public_base_url=f"http://127.0.0.1:{port}"))
    with running(app, port=port) as url:

        async def register() -> None:
            pins = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
            async with A2AClient() as client:
                await Registry(data).register(client, url, anchor=pins)

        asyncio.run(register())
    service = CoordinatorService(Workspace(data))
    order = DelegationOrder(
        agent=service.agent("remote-risk"), skill="interpret-risk-policy", payload={}
    )
    submitted = service.submit(order)
    document = service.run(submitted.run_id)
    assert document["ownership_path"] == ["operator"]
    assert [b["state"] for b in document["branches"]] == ["ADMITTED"]
    assert document["live_branches"] == [submitted.attempt_id]
    assert "ADMITTED" in render_document(document)
    shown = service.audit_show(submitted.run_id)
    assert [b["state"] for b in shown["branches"]] == ["ADMITTED"]
    assert "ADMITTED" in render_reconstruction(shown)
