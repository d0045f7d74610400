"""``federation serve guard``: the coordinator's CLI hands over to the kit's guard, whose
configuration errors end with one line and exit status 2, before any upstream is asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_cards.keys import KeySet, SigningKey
from tests.servers import free_port


def serve_guard(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "coordinator", "serve", "guard", *args]
    env = {**os.environ, "FEDERATION_DATA_DIR": str(tmp_path / "coordinator"), **extra}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_the_cli_runs_the_guard_s_own_options(tmp_path: Path) -> None:
    done = serve_guard(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert "--upstream" in done.stdout and "--skill-scope" in done.stdout


def test_a_weak_audit_token_is_refused_by_its_name(tmp_path: Path) -> None:
    args = ("--upstream", "http://127.0.0.1:9", "--data-dir", str(tmp_path / "guard"))
    done = serve_guard(tmp_path, *args, GUARD_AUDIT_TOKEN="password1234")
    assert done.returncode == 2, done.stderr
    assert "operator_token_weak" in done.stderr and "GUARD_AUDIT_TOKEN" in done.stderr
    assert "password1234" not in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "no trusted issuer"),
        (("--skill-scope", "summarize"), "is not SKILL=SCOPE"),
    ],
    ids=["no-issuer", "bad-scope"],
)
def test_a_configuration_error_is_one_line_and_status_2(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    upstream = ("--upstream", "http://127.0.0.1:9", "--data-dir", str(tmp_path / "guard"))
    done = serve_guard(tmp_path, *upstream, *args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("guard: error: ") and said in line, line


def test_an_upstream_that_cannot_be_reached_stops_the_guard_at_start(tmp_path: Path) -> None:
    """The card is fetched before the guard listens: no card, no guard (status 2)."""
    jwks = tmp_path / "issuer.jwks.json"
    jwks.write_text(json.dumps(KeySet(active=SigningKey.generate()).public_jwks()))
    done = serve_guard(
        tmp_path,
        *("--upstream", f"http://127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "g")),
        *("--skill-scope", "summarize=text:summarize", "--trust-issuer", f"issuer={jwks}"),
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("guard: error: cannot fetch http://127.0.0.1:"), line
