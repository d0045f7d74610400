"""Start-up holds its import budget: the modules a command loads, counted, never timed.

Each case runs in a fresh interpreter and lists ``sys.modules`` as the process exits, so a
module imported anywhere on the way (a package ``__init__``, a printer, a command the
user did not ask for) is seen. The servers (both services' apps, uvicorn, the console),
the risk team's code, Alembic and ``openai`` are loaded only by the commands that use
them. A command that needs no service (help, one request to a running coordinator, a
bad input file) loads none of the service's code and stays under a module count: a
ceiling some way above what it loads today, so a new heavy import shows, a small
helper does not.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs ``-m MODULE ARGS...`` or ``import MODULE`` and writes every loaded module's name
# to the file named first, at exit (after SystemExit too).
PROBE = """
import atexit, importlib, runpy, sys
out, mode, target, *rest = sys.argv[1:]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
if mode == "import":
    importlib.import_module(target)
else:
    sys.argv = [target, *rest]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
"""

SERVERS = (
    "remote_risk",
    "member_kit",
    "openai",
    "alembic",
    "uvicorn",
    "fastapi",
    "starlette",
    "coordinator.service.http.api",
    "coordinator.service.http.server",
    "coordinator.console",
)
# What a command answered by one HTTP request (or by argparse alone) has no use for.
CLIENT_ONLY = (*SERVERS, "grpc", "sqlalchemy", "coordinator.service.facade")
# ... nor has a command that fails on its own input, nor one request to a coordinator:
# no service code or storage, no signing (jwt, cryptography, nacl), no settings framework, and
# not httpx's own command-line client (rich, click, pygments).
NO_SERVICE = (
    *CLIENT_ONLY,
    "coordinator.service.",
    "coordinator.storage",
    "coordinator.workspace",
    "coordinator.dispatch",
    "coordinator.authority.delegator",
    "coordinator.authority.identity",
    "psycopg",
    "opentelemetry",
    "jwt",
    "cryptography",
    "nacl",
    "pydantic_settings",
    "rich",
    "click",
    "pygments",
)
# Argument parsing alone: not even the HTTP client or the documents' models.
PARSER_ONLY = (*NO_SERVICE, "coordinator.service", "httpx", "pydantic", "asyncio")


def loaded(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter holds when ``args`` (``import X`` or ``-m X ...``)
    is done; the command's own exit status is returned as the ``exit:N`` member."""
    out = tmp_path / "modules.txt"
    quiet = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        cwd=ROOT,
        env={**quiet, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return {*out.read_text().split(), f"exit:{done.returncode}"}


def heavy(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The loaded modules that are, or live under, one of ``forbidden`` (a name ending
    in ``.`` forbids the package's modules but not the package itself)."""
    return sorted(
        m
        for m in modules
        if any(
            m.startswith(f) if f.endswith(".") else m == f or m.startswith(f + ".")
            for f in forbidden
        )
    )


RISK_SERVER = ("member_kit.server", "fastapi", "uvicorn", "grpc", "openai", "alembic")


@pytest.mark.parametrize(
    ("target", "forbidden"),
    [
        ("coordinator", ("remote_risk", "member_kit", "coordinator.", "sqlalchemy", "httpx")),
        ("coordinator.cli.main", CLIENT_ONLY),
        ("coordinator.workspace", SERVERS),
        ("coordinator.assessment.evaluate", SERVERS),
        ("remote_risk", ("remote_risk.", "member_kit", "sqlalchemy", "httpx")),
        ("member_kit", ("member_kit.", "sqlalchemy", "httpx")),
        ("remote_risk.risk.model", RISK_SERVER),
        ("agent_cards", ("agent_cards.", "sqlalchemy", "httpx")),
        ("agent_cards.models.settings", ("openai", "httpx", "sqlalchemy")),
        ("agent_cards.models.client", ("openai", "sqlalchemy", "alembic")),
        ("agent_cards.storage.engine", ("alembic", "openai", "httpx", "psycopg")),
        ("coordinator.assessment.model_gateway", SERVERS),
        ("coordinator.storage.engine", SERVERS),
        ("member_kit.storage.engine", ("member_kit.server", "psycopg", *SERVERS[2:])),
    ],
)
def test_importing_loads_no_server(tmp_path: Path, target: str, forbidden: tuple[str, ...]) -> None:
    """A package's ``__init__`` imports nothing (``coordinator``, ``remote_risk``); the
    coordinator loads nothing of the risk team's code at import, not even the evaluation
    that runs its rules in-process; and ``openai`` waits for a model to be configured."""
    modules = loaded(tmp_path, "import", target)
    assert target in modules
    assert heavy(modules, forbidden) == []


@pytest.mark.parametrize("argv", [("--help",), ("agents", "--help"), ("audit", "verify", "-h")])
def test_help_loads_only_the_parser(tmp_path: Path, argv: tuple[str, ...]) -> None:
    modules = loaded(tmp_path, "-m", "coordinator", *argv)
    assert "exit:0" in modules
    assert "coordinator.cli.parser" in modules
    assert heavy(modules, PARSER_ONLY) == []
    assert len(modules) < 150  # 100 today: the interpreter, argparse and the parser


SERVER = {"FEDERATION_SERVER": "http://127.0.0.1:1"}


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (("--server", "http://127.0.0.1:1", "agents", "--json"), {}),
        (("agents", "show", "x"), SERVER),
        (("run", "show", "run-x"), SERVER),
    ],
)
def test_a_command_on_a_server_loads_only_the_client(
    tmp_path: Path, argv: tuple[str, ...], env: dict[str, str]
) -> None:
    """``federation --server URL agents`` is one HTTP request (refused here: nothing
    listens on port 1): the client and the printers, no service, database or server."""
    token = {"FEDERATION_OPERATOR_TOKEN": secrets.token_urlsafe(32), **env}
    modules = loaded(tmp_path, "-m", "coordinator", *argv, env=token)
    assert "exit:3" in modules  # it got as far as the request: unavailable
    assert "coordinator.cli.api_client" in modules
    assert heavy(modules, (*NO_SERVICE, "coordinator.service", "pydantic")) == []
    assert len(modules) < 320  # 259 today, 100 of them the parser's


def test_a_delegation_sent_to_a_server_loads_its_request_model_only(tmp_path: Path) -> None:
    """``delegate`` checks its arguments with the API's own request model before it
    sends them; nothing else of the service is loaded."""
    given = tmp_path / "input.json"
    given.write_text('{"amount": 1}')
    token = {"FEDERATION_OPERATOR_TOKEN": secrets.token_urlsafe(32), **SERVER}
    argv = ("delegate", "--to", "x", "--skill", "y", "--input", str(given))
    modules = loaded(tmp_path, "-m", "coordinator", *argv, env=token)
    assert "exit:3" in modules
    assert "coordinator.service.api_requests" in modules
    assert heavy(modules, NO_SERVICE) == ["coordinator.service.api_requests"]
    assert len(modules) < 420  # 341 today


@pytest.mark.parametrize(
    "argv",
    [
        ("delegate", "--to", "x", "--skill", "y", "--input", "{missing}"),
        ("register", "http://127.0.0.1:1", "--trust-key", "{missing}"),
        ("audit", "verify", "--bundle", "{missing}"),
        ("audit", "verify", "--bundle", "{missing}", "--coordinator-key", "{missing}"),
        ("evaluate", "--repeat", "0"),
    ],
)
def test_a_command_failing_on_its_input_loads_no_service(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """A local command whose input file is missing, or an option out of range, says so
    (exit 2) before the service is built: no database opened, no server, model client or
    risk code loaded, and no more modules than reading the file and checking the
    arguments takes."""
    missing = str(tmp_path / "missing.json")
    local = ("--data-dir", str(tmp_path / "data"))
    argv = tuple(arg.replace("{missing}", missing) for arg in argv)
    modules = loaded(tmp_path, "-m", "coordinator", *local, *argv)
    assert "exit:2" in modules
    assert heavy(modules, NO_SERVICE) in ([], ["coordinator.service.api_requests"])
    assert len(modules) < 320  # 252 today for delegate (its request model), 139 for verify
    assert not (tmp_path / "data").exists()


def test_checking_a_bundle_offline_builds_no_service(tmp_path: Path) -> None:
    """``audit verify --bundle`` checks the file here, with the operator's keys: the
    proof checker is loaded, no service, dispatch or server (a malformed bundle: exit 1)."""
    bundle = tmp_path / "bundle.json"
    bundle.write_text("{}")
    local = ("--data-dir", str(tmp_path / "data"))
    argv = ("audit", "verify", "--bundle", str(bundle), "--unanchored")
    modules = loaded(tmp_path, "-m", "coordinator", *local, *argv)
    assert "exit:1" in modules
    assert "coordinator.audit.proof_check" in modules
    offline = (
        *SERVERS,
        "coordinator.service.facade",
        "coordinator.dispatch",
        "coordinator.workspace",
    )
    assert heavy(modules, offline) == []
    assert not (tmp_path / "data").exists()


def test_the_risk_service_help_loads_no_server(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "-m", "remote_risk", "--help")
    assert "exit:0" in modules
    assert heavy(modules, RISK_SERVER) == []
