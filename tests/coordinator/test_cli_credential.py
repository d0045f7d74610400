"""The operator credential a ``--server`` command sends, read from the environment by the
rules the coordinator holds its own token to: one source (the variable or a file), a
strong token, a readable file; every refusal one line with its reason, before any request.

Nothing listens on 127.0.0.1:1, so a command whose credential is accepted ends
``unreachable`` (exit 3): it got as far as sending.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from coordinator.cli.main import main

SERVER = "http://127.0.0.1:1"
ENV = ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_OPERATOR_TOKEN_FILE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["--server", SERVER, *argv])
    return code, capsys.readouterr().err


def test_a_token_in_a_file_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(secrets.token_urlsafe(32) + "\n")
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN_FILE", str(token_file))
    code, err = run(capsys, "agents")
    assert (code, err.count("\n")) == (3, 1)
    assert "error: unreachable: " in err


def test_the_server_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEDERATION_SERVER", SERVER)
    monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", secrets.token_urlsafe(32))
    assert main(["runs"]) == 3
    assert f"GET /v1/runs {SERVER}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("token", "token_file", "reason"),
    [
        (None, None, "operator_token_missing"),
        ("x" * 40, None, "operator_token_weak"),
        (secrets.token_urlsafe(32) + "!", None, "operator_token_malformed"),
        (secrets.token_urlsafe(32), "token", "operator_token_ambiguous"),
        (None, "absent", "operator_token_unreadable"),
    ],
    ids=["missing", "weak", "malformed", "ambiguous", "unreadable"],  # same on every worker
)
def test_a_bad_credential_is_one_line_before_any_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    token: str | None,
    token_file: str | None,
    reason: str,
) -> None:
    (tmp_path / "token").write_text(secrets.token_urlsafe(32))
    if token is not None:
        monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN", token)
    if token_file is not None:
        monkeypatch.setenv("FEDERATION_OPERATOR_TOKEN_FILE", str(tmp_path / token_file))
    code, err = run(capsys, "agents")
    assert code == 2
    assert err.startswith(f"federation: error: {reason}: ") and err.count("\n") == 1
    assert token is None or token not in err
