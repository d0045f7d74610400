"""The command line's conventions, from outside: one error line, exit codes that mean one
thing, quiet broken pipes, read-only commands that create nothing, help on every option."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.assessment import chain_case, scenario
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.cli import parser as cli_parser
from coordinator.cli.main import EXIT_CODES
from coordinator.storage import datadir
from coordinator.storage.engine import DATABASE_FILE
from coordinator.workspace import DATABASE_ENV
from tests.processes import PAYLOAD, registered


def federation(
    data: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        input=stdin,
    )


def one_error(completed: subprocess.CompletedProcess[str], reason: str, code: int) -> None:
    assert completed.returncode == code, completed.stderr
    assert completed.stderr.startswith(f"federation: error: {reason}: ")
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr


def test_version() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "coordinator", "--version"], capture_output=True, text=True
    )
    assert completed.returncode == 0 and completed.stdout.startswith("federation 0.")


def actions(parser: argparse.ArgumentParser, path: str = "federation") -> list[tuple[str, str]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += actions(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((f"{path} {action.dest}", action.help or ""))
    return found


def test_every_option_and_argument_has_plain_help() -> None:
    missing = [
        name for name, text in actions(cli_parser.build_parser()) if not text or "``" in text
    ]
    assert missing == []


def test_the_parser_constants_match_their_owners() -> None:
    """The parser keeps a few names to itself (start-up time); they must not drift."""
    assert cli_parser.CASES == scenario.CASES
    assert cli_parser.CHAIN_CASE == chain_case.CASE
    assert cli_parser.DATA_DIR_ENV == datadir.ENV_VAR
    assert cli_parser.DATABASE_ENV == DATABASE_ENV


def test_help_imports_neither_the_model_client_nor_the_database() -> None:
    script = (
        "import sys\n"
        "from coordinator.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('openai', 'sqlalchemy', 'httpx', 'fastapi') "
        "if m in sys.modules))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert completed.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "command",
    [
        ["audit", "verify"],
        ["runs"],
        ["run", "show", "run-x"],
        ["audit", "show", "run-x"],
        ["audit", "reconcile", "run-x"],
        ["audit", "prove", "run-x", "--output", "bundle.json"],
    ],
)
def test_read_only_commands_create_nothing(tmp_path: Path, command: list[str]) -> None:
    """On a data directory where nothing was recorded (a mistyped --data-dir), reading
    says so and exits 2; no database appears."""
    one_error(federation(tmp_path / "typo", *command), "no_ledger", 2)
    assert not (tmp_path / "typo" / DATABASE_FILE).exists()


@pytest.mark.parametrize("command", [["keys", "show"], ["completion", "bash"]])
def test_a_closed_pipe_is_quiet(tmp_path: Path, command: list[str]) -> None:
    """``federation completion bash | head`` printed a traceback: the script was printed
    outside the handler that keeps a closed pipe quiet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "--data-dir", str(tmp_path), *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader goes away before anything is written
    _, err = process.communicate(timeout=60)
    assert b"Traceback" not in err and err == b""
    assert process.returncode in (0, 141)


def test_a_bad_argument_is_a_usage_error_before_anything_is_recorded(tmp_path: Path) -> None:
    """--timeout -5 used to become a FAILED run; now it is refused as an argument."""
    (tmp_path / "in.json").write_text("{}")
    completed = federation(
        tmp_path,
        *("delegate", "--to", "a", "--skill", "s", "--input", str(tmp_path / "in.json")),
        *("--timeout", "-5"),
    )
    one_error(completed, "bad_argument", 2)
    assert "timeout" in completed.stderr
    assert not (tmp_path / DATABASE_FILE).exists()


def test_input_dash_reads_standard_input(tmp_path: Path) -> None:
    args = ("delegate", "--to", "nobody", "--skill", "s", "--input", "-")
    one_error(federation(tmp_path, *args, stdin="{not json"), "input_not_json", 2)
    one_error(federation(tmp_path, *args, stdin=json.dumps({"a": 1})), "unknown_agent", 2)


def test_an_unreachable_remote_is_exit_3(tmp_path: Path) -> None:
    one_error(federation(tmp_path, "register", "http://127.0.0.1:9"), "card_unreachable", 3)


def test_the_exit_codes_are_documented() -> None:
    reference = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in reference


def test_a_kid_that_begins_with_a_dash_is_a_value() -> None:
    """Thumbprints are base64url and may begin with '-': ``--expect-kid -Xy`` still works."""
    from coordinator.cli.main import joined_values

    parsed = cli_parser.build_parser().parse_args(
        joined_values(["register", "http://127.0.0.1:9", "--expect-kid", "-Xy_z"])
    )
    assert parsed.expect_kid == "-Xy_z"
    assert joined_values(["--expect-kid"]) == ["--expect-kid"]


def test_shell_completion_scripts(tmp_path: Path) -> None:
    """`federation completion bash` prints a script bash accepts, naming the commands."""
    completed = federation(tmp_path, "completion", "bash")
    assert completed.returncode == 0, completed.stderr
    assert "delegate" in completed.stdout and "--expect-kid" in completed.stdout
    checked = subprocess.run(["bash", "-n"], input=completed.stdout, text=True)
    assert checked.returncode == 0
    assert not (tmp_path / DATABASE_FILE).exists()


@pytest.mark.parametrize("number", [2**60, -(2**53), "1e400"])
def test_an_input_number_beyond_i_json_is_refused_before_anything_is_sent(
    number: int | str, tmp_path: Path
) -> None:
    """The API's edge holds a delegation's input to I-JSON numbers; ``delegate --input``
    read the file without that rule, and an integer beyond 2**53 - 1 reached the request
    digest and ended the command with ``internal_error`` (exit 70). It is now the same
    refusal as the API's, before any token is minted or anything sent."""
    text = json.dumps({**PAYLOAD, "brief": {**PAYLOAD["brief"], "n": "NUMBER"}})
    (tmp_path / "in.json").write_text(text.replace('"NUMBER"', str(number)))
    with registered(tmp_path) as (data, remote):
        completed = federation(
            data.root,
            *("delegate", "--to", "remote-risk", "--skill", RISK_SKILL),
            *("--input", str(tmp_path / "in.json")),
        )
        one_error(completed, "json_number_out_of_range", 2)
        with sqlite3.connect(remote.data_dir / "remote-risk.db") as connection:
            [(tasks,)] = connection.execute("SELECT count(*) FROM remote_risk_tasks").fetchall()
        assert tasks == 0
