"""The issue's "done when": one `federation delegate` against remote_risk, with
``OTEL_TRACES_EXPORTER=console`` on both, prints spans of one trace from both processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.coordinator.test_api import PAYLOAD, SKILL


def spans(stderr: str) -> list[dict[str, Any]]:
    """The spans among standard error's JSON lines (``delegate --json`` reports its steps
    there too, as JSON lines without a span context)."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if "context" in line]


def test_one_delegation_prints_one_trace_from_both_processes(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FEDERATION_", "OTEL_"))},
        "FEDERATION_DATA_DIR": str(tmp_path / "data"),
        "OTEL_TRACES_EXPORTER": "console",
    }
    federation = [sys.executable, "-m", "coordinator"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*federation, *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done

    (tmp_path / "jwks.json").write_text(run("keys", "show").stdout)
    issuer = f"urn:a2a-federation:coordinator={tmp_path / 'jwks.json'}"
    risk = subprocess.Popen(
        [
            *federation,
            "serve",
            "risk",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "rr"),
            "--trust-issuer",
            issuer,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert risk.stdout is not None
        url = risk.stdout.readline().strip().rsplit(" ", 1)[1]
        (tmp_path / "pins.json").write_text(httpx.get(url + "/.well-known/jwks.json").text)
        run(
            "register",
            url,
            "--skill",
            SKILL,
            "--trust-key",
            str(tmp_path / "pins.json"),
            "--return-finding",
            SKILL,
        )
        (tmp_path / "input.json").write_text(json.dumps(PAYLOAD))
        delegated = run(
            "delegate",
            "--to",
            "remote-risk",
            "--skill",
            SKILL,
            "--input",
            str(tmp_path / "input.json"),
            "--json",
        )
    finally:
        risk.terminate()
        _, risk_err = risk.communicate(timeout=30)
    document = json.loads(delegated.stdout)
    assert document["local_state"] == "ACCEPTED"
    trace = "0x" + document["trace_id"]
    ours = [s for s in spans(delegated.stderr) if s["context"]["trace_id"] == trace]
    theirs = [s for s in spans(risk_err) if s["context"]["trace_id"] == trace]
    assert {s["resource"]["attributes"]["service.name"] for s in ours} == {"coordinator"}
    assert {s["resource"]["attributes"]["service.name"] for s in theirs} == {"remote-risk"}
    assert {"federation.run", "a2a/SendStreamingMessage"} <= {s["name"] for s in ours}
    assert {"POST /a2a/jsonrpc", "remote_risk.skill"} <= {s["name"] for s in theirs}
