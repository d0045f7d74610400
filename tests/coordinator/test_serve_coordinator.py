"""`federation serve coordinator` as a real process: first line, token, shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

TOKEN = "operator-token-for-tests-0123456789"


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    return {**inherited, "FEDERATION_DATA_DIR": str(tmp_path / "data"), **extra}


def federation(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "coordinator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_refuses_to_start_without_an_operator_token(tmp_path: Path) -> None:
    """Without a token the service prints one line and exits with status 2."""
    process = federation(environment(tmp_path), "serve", "coordinator", "--port", "0")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert out == ""
    assert err.count("\n") == 1 and ("error: operator_token_missing: " in err)


def test_refuses_a_short_token(tmp_path: Path) -> None:
    """A token too short to be a secret is refused without being echoed."""
    env = environment(tmp_path, FEDERATION_OPERATOR_TOKEN="short-secret")
    process = federation(env, "serve", "coordinator", "--port", "0")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert ("error: operator_token_weak: " in err) and "short-secret" not in err


def test_serves_with_a_token_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    """With --operator-token-file it prints its URL first, serves the API, and exits cleanly."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = environment(tmp_path)
    process = federation(
        env, "serve", "coordinator", "--port", "0", "--operator-token-file", str(token_file)
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("coordinator listening on http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1]
        assert httpx.get(f"{url}/healthz", timeout=10).json() == {"status": "ok"}
        assert httpx.get(f"{url}/v1/runs", timeout=10).status_code == 401
        authorized = {"Authorization": f"Bearer {TOKEN}"}
        answer = httpx.get(f"{url}/v1/runs", headers=authorized, timeout=10)
        assert answer.json() == {"runs": [], "next_cursor": None}
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert process.returncode in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in err
        assert "Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_serve_risk_still_takes_its_own_flags(tmp_path: Path) -> None:
    """`serve risk` keeps passing its options through to remote_risk."""
    process = federation(environment(tmp_path), "serve", "risk", "--help")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and "--trust-issuer" in out
