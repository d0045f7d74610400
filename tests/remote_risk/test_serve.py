"""``python -m remote_risk`` runs the service as a process and announces its real URL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agent_cards.keys import SigningKey, TrustedKeys, load_or_create
from agent_cards.signing import verify_card
from contracts import strict_json
from contracts.wire import AGENT_CARD_PATH
from member_kit.server.app import JSONRPC_PATH, JWKS_PATH
from member_kit.trust.issuers import TRUST_ENV_VAR


@contextmanager
def remote_risk(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run ``python -m remote_risk`` with ``args`` on port 0 and yield its announced URL."""
    environ = {k: v for k, v in os.environ.items() if k != TRUST_ENV_VAR}
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_risk", "--host", "127.0.0.1", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline().strip()
        match = re.fullmatch(r"remote_risk listening on (http://127\.0\.0\.1:(\d+))", first_line)
        assert match, first_line
        assert int(match.group(2)) > 0
        yield match.group(1), process
    finally:
        process.terminate()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_port_zero_prints_the_real_url_first_and_serves_there(tmp_path: Path) -> None:
    """With port 0 the first stdout line names the bound port, and the card there points home."""
    with remote_risk("--insecure-anonymous", "--data-dir", str(tmp_path)) as (base_url, _):
        card = httpx.get(base_url + AGENT_CARD_PATH, timeout=10).json()
        assert card["supportedInterfaces"][0]["url"] == base_url + JSONRPC_PATH


def test_insecure_anonymous_is_announced_on_stderr(tmp_path: Path) -> None:
    """Running without trusted issuers on purpose prints a warning before the listening line."""
    with remote_risk("--insecure-anonymous", "--data-dir", str(tmp_path)) as (_, process):
        assert process.stderr is not None
        assert "WARNING: remote_risk runs with --insecure-anonymous" in process.stderr.readline()


def test_refuses_to_start_without_a_trusted_issuer(tmp_path: Path) -> None:
    """With no trusted issuer and no --insecure-anonymous the process exits 2 with one line."""
    environ = {k: v for k, v in os.environ.items() if k != TRUST_ENV_VAR}
    finished = subprocess.run(
        [sys.executable, "-m", "remote_risk", "--port", "0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr.startswith("remote_risk: error: no trusted issuer configured")
    assert finished.stderr.count("\n") == 1


def test_trusted_process_checks_tokens_and_signs_its_card_with_its_data_dir_key(
    tmp_path: Path,
) -> None:
    """With --trust-issuer the process refuses a call without a token (401), and its card
    verifies against its JWKS with the key kept in DATA_DIR/keys."""
    issuer_jwks = tmp_path / "coordinator.jwks.json"
    issuer_jwks.write_bytes(strict_json.dumps({"keys": [SigningKey.generate().public_jwk()]}))
    data_dir = tmp_path / "data"
    args = ("--trust-issuer", f"urn:x:coordinator={issuer_jwks}", "--data-dir", str(data_dir))
    with remote_risk(*args) as (base_url, _):
        call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        refused = httpx.post(
            base_url + JSONRPC_PATH, json=call, headers={"A2A-Version": "1.0"}, timeout=10
        )
        card = httpx.get(base_url + AGENT_CARD_PATH, timeout=10).json()
        jwks = httpx.get(base_url + JWKS_PATH, timeout=10).content
    assert refused.status_code == 401
    assert refused.json()["error"]["data"][0]["metadata"]["reason"] == "token_missing"
    kid = verify_card(card, TrustedKeys.from_json(jwks)).kid
    assert kid == load_or_create(data_dir / "keys").active.kid


def test_federation_serve_risk_keeps_its_state_under_the_data_dir_and_names_its_kid(
    tmp_path: Path,
) -> None:
    """`federation --data-dir D serve risk` keeps the service's keys under D/remote-risk and
    prints the kid an operator pins and where the public keys are, right after its URL."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in (TRUST_ENV_VAR, "REMOTE_RISK_DATA_DIR") and not k.startswith("FEDERATION_")
    }
    command = [sys.executable, "-m", "coordinator", "--data-dir", str(tmp_path), "serve", "risk"]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", "0", "--insecure-anonymous"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    try:
        assert process.stdout is not None
        listening = process.stdout.readline().strip()
        announced = process.stdout.readline().strip()
    finally:
        process.terminate()
        process.communicate(timeout=10)
    base_url = listening.rsplit(" ", 1)[1]
    kid = load_or_create(tmp_path / "remote-risk" / "keys").active.kid
    assert announced == f"card signed with kid {kid}; public keys at {base_url}{JWKS_PATH}"
