"""Operator tokens (remote_risk's audit and metrics tokens, the coordinator's API token)
must be strong and cannot be guessed at the speed of the network.

remote_risk started with a one-character audit or metrics token and answered every wrong
guess 401 forever. Now a weak token stops the service before it listens (one line, exit
2, saying how to generate one, never echoing the token), and a client that presents
wrong tokens is refused 429 with ``Retry-After``, whatever ``X-Forwarded-For`` it claims.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cards.edge.errors import WeakOperatorToken
from agent_cards.edge.limits import EdgeLimits
from agent_cards.edge.operator_token import OperatorToken
from agent_cards.edge.protocol import uvicorn_options
from agent_cards.edge.throttle import DEFAULT_ATTEMPTS
from coordinator.authority.identity import coordinator_keys
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.servers import free_port, running

STRONG = "audit-token-for-tests-0123456789abcdef"
METRICS = "metrics-token-for-tests-0123456789abcdef"
EDGE = uvicorn_options(EdgeLimits())


def _start(**env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("REMOTE_RISK_")}
    return subprocess.run(
        [sys.executable, "-m", "remote_risk", "--insecure-anonymous", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**inherited, **env},
    )


@pytest.mark.parametrize("variable", ["REMOTE_RISK_AUDIT_TOKEN", "REMOTE_RISK_METRICS_TOKEN"])
@pytest.mark.parametrize(
    "weak", ["x", "a" * 40, "short-but-not-that-short-1234", "abcdefgh12345678abcdefgh12345678"]
)
def test_remote_risk_refuses_to_start_with_a_weak_token(
    tmp_path: Path, variable: str, weak: str
) -> None:
    done = _start(**{variable: weak, "REMOTE_RISK_DATA_DIR": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("remote_risk: error: operator_token_weak: " + variable)
    assert "secrets.token_urlsafe(32)" in done.stderr
    assert weak not in done.stderr.replace(variable, "")


def test_the_edge_token_refuses_weak_values() -> None:
    with pytest.raises(WeakOperatorToken) as refused:
        OperatorToken("x", "audit", "audit_disabled")
    assert refused.value.reason == "operator_token_weak"


@pytest.fixture
def risk(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        data_dir=tmp_path,
        audit_token=STRONG,
        metrics_token=METRICS,
    )
    with running(create_app(settings), port=port, **EDGE) as url:
        yield url


def _guesses(url: str, tries: int) -> list[httpx.Response]:
    answers = []
    for index in range(tries):
        headers = {
            "Authorization": f"Bearer guess-{index:04d}-{'x' * 32}",
            "X-Forwarded-For": f"198.51.100.{index + 1}",
        }
        answers.append(httpx.get(url, headers=headers, timeout=10))
    return answers


def _assert_throttled(answers: list[httpx.Response]) -> None:
    statuses = [answer.status_code for answer in answers]
    assert statuses[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS, statuses
    assert set(statuses[DEFAULT_ATTEMPTS:]) == {429}, statuses
    last = answers[-1]
    assert last.json()["error"]["reason"] == "token_throttled"
    assert int(last.headers["Retry-After"]) >= 1


@pytest.mark.parametrize("path", ["/audit/head", "/metrics"])
def test_remote_risk_throttles_wrong_tokens(risk: str, path: str) -> None:
    _assert_throttled(_guesses(risk + path, DEFAULT_ATTEMPTS + 3))


def test_each_token_counts_its_own_failures(risk: str) -> None:
    """Guessing the metrics token does not lock the audit routes."""
    _guesses(risk + "/metrics", DEFAULT_ATTEMPTS + 1)
    answer = httpx.get(
        risk + "/audit/head", headers={"Authorization": f"Bearer {STRONG}"}, timeout=10
    )
    assert answer.status_code == 200


def test_coordinator_api_throttles_wrong_tokens(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    coordinator_keys(data)
    ws = Workspace(data)
    settings = CoordinatorSettings(operator_token=STRONG)
    try:
        with running(create_api(ws, settings), **EDGE) as api:
            answers = _guesses(api + "/v1/runs", DEFAULT_ATTEMPTS + 3)
    finally:
        ws.close()
    _assert_throttled(answers)
