"""One real deployment for the console's tests, and a browser to drive it.

``deployment`` (once per session): ``federation demo`` run on a data directory (its five
cases), a hostile a2a-sdk peer registered twice and then changed so that both its
registrations hold a card for approval, a delegation to it whose artifact is refused and
one whose equally hostile artifact is admitted, a slow remote_risk as a process of its
own, and ``federation serve coordinator`` serving that directory as a process of its own.
Everything listens on 127.0.0.1.

``browser`` (once per module): Debian's Chromium driven by Playwright with the system
executable; nothing is downloaded. Without Chromium the browser tests are skipped, or
fail when ``FEDERATION_REQUIRE_BROWSER=1`` or ``CI`` is set (``make test`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.peer import ECHO_SCHEMA, HostilePeer
from tests.processes import RemoteRiskProcess
from tests.servers import free_port, running

# In CI (or when asked) a missing browser fails the run instead of skipping it.
REQUIRED = os.environ.get("FEDERATION_REQUIRE_BROWSER") == "1" or bool(os.environ.get("CI"))
TOKEN = "console-operator-token-0123456789"
TRACE_TEMPLATE = "http://127.0.0.1:16686/trace/{trace_id}"
SLOW_SECONDS = 120.0
RISK_SKILL = "interpret-risk-policy"
SLOW_INPUT = {
    "brief": {"id": "b1", "uses_real_conversations": False},
    "policy_note": {
        "id": "p1",
        "refund_execution_permitted": False,
        "real_conversations_require_privacy_review": True,
    },
}


def environment(data: Path, **extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    return {**inherited, "FEDERATION_DATA_DIR": str(data), **extra}


def federation(data: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(data),
    )
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@dataclass
class Deployment:
    data: Path
    url: str
    cases: dict[str, dict[str, Any]]
    refused_run: str
    admitted_run: str
    slow: RemoteRiskProcess
    peer: HostilePeer
    http: httpx.Client = field(repr=False)

    @property
    def console(self) -> str:
        return self.url + "/console"

    def submit_slow_run(self) -> str:
        """A delegation to the slow remote_risk, left to the serving coordinator's worker."""
        answer = self.http.post(
            "/v1/delegations",
            json={"to": "slow-risk", "skill": RISK_SKILL, "input": SLOW_INPUT, "wait": False},
        )
        assert answer.status_code == 202, answer.text
        run_id: str = answer.json()["run_id"]
        return run_id

    def remote_task_state(self, task_id: str) -> str:
        """The task's state as the remote itself stores it (its own database)."""
        with sqlite3.connect(self.slow.data_dir / "remote-risk.db") as connection:
            [(state,)] = connection.execute(
                "SELECT state FROM remote_risk_tasks WHERE id = ?", (task_id,)
            ).fetchall()
        return str(state)


def run_demo(data: Path) -> dict[str, dict[str, Any]]:
    done = federation(data, "demo", "--json", "--case", "all")
    cases = json.loads(done.stdout)["cases"]
    # the pilot's cases, each one run; the chain case (three services) reports its own shape
    return {case["case"]: case["run"] for case in cases if "run" in case}


def register_peer(data: Path, peer: HostilePeer, name: str, *, held: bool = False) -> None:
    key_file = data.parent / "peer-key.json"
    key_file.write_text(json.dumps(peer.key.public_jwk()))
    schema = data.parent / "echo-schema.json"
    schema.write_text(json.dumps(ECHO_SCHEMA))
    args = ["register", peer.base_url, "--name", name, "--trust-key", str(key_file)]
    done = federation(data, *args, "--return-schema", f"echo={schema}", check=not held)
    if held:
        assert done.returncode == 1 and "pending" in done.stdout + done.stderr, done


def hostile_delegation(data: Path, ends_as: str) -> str:
    """A delegation to the hostile peer, ending as ``ends_as``: REJECTED (its text part
    is outside the contract) or ACCEPTED (its one data part matches the echo schema)."""
    input_file = data.parent / "echo-input.json"
    input_file.write_text(json.dumps({"question": "ping"}))
    args = ["delegate", "--to", "hostile", "--skill", "echo", "--input", str(input_file)]
    done = federation(data, *args, "--json", check=False)
    document = json.loads(done.stdout)
    assert document["local_state"] == ends_as, document
    run_id: str = document["run_id"]
    return run_id


def start_slow_risk(root: Path, data: Path) -> RemoteRiskProcess:
    jwks = root / "coordinator-jwks.json"
    jwks.write_text(federation(data, "keys", "show").stdout)
    slow = RemoteRiskProcess(root / "slow-risk", jwks, "--skill-delay-seconds", str(SLOW_SECONDS))
    slow.start()
    key_file = root / "slow-risk-key.json"
    key_file.write_text(json.dumps(slow.keys.public_jwks()))
    federation(
        data, "register", slow.base_url, "--name", "slow-risk", "--trust-key", str(key_file),
        "--return-finding", RISK_SKILL,
    )  # fmt: skip
    return slow


def serve(data: Path, token_file: Path) -> tuple[subprocess.Popen[str], str]:
    """``federation serve coordinator`` on a free port; its URL from its first line."""
    env = environment(data, FEDERATION_TRACE_URL_TEMPLATE=TRACE_TEMPLATE)
    argv = ["serve", "coordinator", "--port", "0", "--operator-token-file", str(token_file)]
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    if not first.startswith("coordinator listening on http://127.0.0.1:"):
        process.kill()
        raise AssertionError(f"the coordinator did not start: {first!r}")
    return process, first.rsplit(" ", 1)[1]


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("console")
    data = root / "data"
    cases = run_demo(data)
    port, port_b = free_port(), free_port()
    peer = HostilePeer(f"http://127.0.0.1:{port}")
    # a second agent of its own (its own address and key): one address is one agent
    peer_b = HostilePeer(f"http://127.0.0.1:{port_b}")
    with running(peer.app(), port=port), running(peer_b.app(), port=port_b):
        register_peer(data, peer, "hostile")
        register_peer(data, peer_b, "hostile-b")
        refused_run = hostile_delegation(data, "REJECTED")
        peer.admissible = True
        admitted_run = hostile_delegation(data, "ACCEPTED")
        peer.admissible = False
        peer.asks_for_more = peer_b.asks_for_more = True
        register_peer(data, peer, "hostile", held=True)
        register_peer(data, peer_b, "hostile-b", held=True)
        slow = start_slow_risk(root, data)
        token_file = root / "operator-token"
        token_file.write_text(TOKEN + "\n")
        process, url = serve(data, token_file)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
                yield Deployment(data, url, cases, refused_run, admitted_run, slow, peer, http)
        finally:
            stop(process)
            slow.stop()


def browser_missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (a browser is required here: run `make browser` as root)")
    pytest.skip(f"{reason}; `make browser` installs Debian's chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = shutil.which("chromium")
    if executable is None:
        browser_missing("no chromium on PATH")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_missing("playwright is not installed")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox cannot start; and a
        # container's small /dev/shm must not crash a tab
        args = ["--no-sandbox", "--disable-dev-shm-usage"]
        launched = playwright.chromium.launch(executable_path=executable, args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests leave a screenshot of each page they look at."""
    return tmp_path_factory.mktemp("console-screenshots")
