"""Structured logs of both services: one set-up, an access line per request naming its
trace, ISO 8601 UTC times, and no secret in any line (issue 16 item 4)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.keys import SigningKey
from contracts import strict_json
from coordinator.telemetry import logs as coordinator_logs
from member_kit.server.app import JSONRPC_PATH
from member_kit.telemetry import logs as risk_logs

TOKEN = "operator-token-for-tests-0123456789"
API_KEY = "sk-model-key-for-tests-9876543210"
METRICS_TOKEN = "metrics-token-for-tests-5555555555"
TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"
FAKE_JWT = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLW5vdC1yZWFs"
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.mark.parametrize("module", [coordinator_logs, risk_logs])
def test_json_lines_have_utc_times_fields_and_no_secrets(module: Any) -> None:
    stream = io.StringIO()
    module.setup("info", "json", stream)
    module.add_secret(API_KEY)
    try:
        log = logging.getLogger("test.observability")
        log.info("calling with Bearer %s and key %s", FAKE_JWT, API_KEY)
        log.warning(
            "db at postgresql://app:hunter2secret@127.0.0.1/test", extra={"fields": {"a": 1}}
        )
        log.debug("not shown at info")
    finally:
        module.reset()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["level"] for line in lines] == ["info", "warning"]
    assert all(ISO_UTC.match(line["time"]) for line in lines)
    assert lines[0]["message"] == "calling with Bearer [redacted] and key [redacted]"
    assert lines[1]["message"] == "db at postgresql://app:[redacted]@127.0.0.1/test"
    assert lines[1]["a"] == 1
    text = stream.getvalue()
    assert FAKE_JWT not in text and API_KEY not in text and "hunter2secret" not in text


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    inherited = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FEDERATION_", "REMOTE_RISK_", "OTEL_"))
    }
    return {**inherited, "FEDERATION_DATA_DIR": str(tmp_path / "data"), **extra}


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    return err


def json_lines(err: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert all(ISO_UTC.match(line["time"]) for line in lines)
    return lines


def test_coordinator_access_log_names_trace_and_denial_and_hides_secrets(tmp_path: Path) -> None:
    env = environment(
        tmp_path,
        FEDERATION_OPERATOR_TOKEN=TOKEN,
        FEDERATION_MODEL_API_KEY=API_KEY,
        FEDERATION_LOG_FORMAT="json",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "coordinator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert re.fullmatch(r"coordinator listening on http://127\.0\.0\.1:\d+", first), first
        url = first.rsplit(" ", 1)[1]
        good = {"Authorization": f"Bearer {TOKEN}", "traceparent": TRACEPARENT}
        assert httpx.get(f"{url}/v1/runs", headers=good, timeout=10).status_code == 200
        wrong = {"Authorization": f"Bearer {API_KEY}"}
        assert httpx.get(f"{url}/v1/runs", headers=wrong, timeout=10).status_code == 401
        err = stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert TOKEN not in err and API_KEY not in err
    access = [line for line in json_lines(err) if line["logger"] == "coordinator.access"]
    ok, refused = access
    assert (ok["method"], ok["path"], ok["status"], ok["trace_id"]) == (
        "GET",
        "/v1/runs",
        200,
        TRACE,
    )
    assert ok["client"].startswith("127.0.0.1:") and ok["duration_ms"] >= 0
    assert (refused["status"], refused["denial_reason"]) == (401, "token_invalid")
    assert len(refused["trace_id"]) == 32 and refused["trace_id"] != TRACE


def test_remote_risk_access_log_names_the_trace_and_denial(tmp_path: Path) -> None:
    jwks = tmp_path / "issuer.jwks.json"
    jwks.write_bytes(strict_json.dumps({"keys": [SigningKey.generate().public_jwk()]}))
    env = environment(tmp_path, REMOTE_RISK_METRICS_TOKEN=METRICS_TOKEN)
    args = ["--trust-issuer", f"urn:x:coordinator={jwks}", "--data-dir", str(tmp_path / "rr")]
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_risk", "--port", "0", "--log-format", "json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert re.fullmatch(r"remote_risk listening on http://127\.0\.0\.1:\d+", first), first
        url = first.rsplit(" ", 1)[1]
        call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        headers = {"A2A-Version": "1.0", "traceparent": TRACEPARENT}
        refused = httpx.post(url + JSONRPC_PATH, json=call, headers=headers, timeout=10)
        assert refused.status_code == 401
        forged = {**headers, "Authorization": f"Bearer {FAKE_JWT}"}
        assert (
            httpx.post(url + JSONRPC_PATH, json=call, headers=forged, timeout=10).status_code == 401
        )
        err = stop(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert FAKE_JWT not in err and METRICS_TOKEN not in err
    lines = json_lines(err)
    access = [line for line in lines if line["logger"] == "remote_risk.access"]
    # the token is checked before the body is read, so the A2A method is not known yet
    assert [(a["path"], a["status"], a["trace_id"]) for a in access] == [
        (JSONRPC_PATH, 401, TRACE),
        (JSONRPC_PATH, 401, TRACE),
    ]
    assert access[0]["denial_reason"] == "token_missing"
    assert access[1]["denial_reason"] not in (None, "token_missing")
    decisions = [line for line in lines if line["message"].startswith("delegation denied")]
    assert len(decisions) == 2 and all(f"trace={TRACE}" in d["message"] for d in decisions)
