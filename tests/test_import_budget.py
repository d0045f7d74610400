"""Start-up holds its import budget: the modules a command loads, counted, never timed.

Each case runs in a fresh interpreter and lists ``sys.modules`` as the process exits, so a
module imported anywhere on the way (a package ``__init__``, a printer, a command the
user did not ask for) is seen. The servers (both services' apps, uvicorn, the console),
the risk team's code, Alembic and ``openai`` are loaded only by the commands that use
them.
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
    "coordinator.service.api",
    "coordinator.service.server",
    "coordinator.console",
)
# What a command answered by one HTTP request (or by argparse alone) has no use for.
CLIENT_ONLY = (*SERVERS, "grpc", "sqlalchemy", "coordinator.service.facade")


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


def test_help_loads_only_the_parser(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "-m", "coordinator", "--help")
    assert "exit:0" in modules
    assert "coordinator.cli.parser" in modules
    assert heavy(modules, CLIENT_ONLY) == []


def test_a_command_on_a_server_loads_only_the_client(tmp_path: Path) -> None:
    """``federation --server URL agents`` is one HTTP request (refused here: nothing
    listens on port 1): the client and the printers, no service, database or server."""
    token = {"FEDERATION_OPERATOR_TOKEN": secrets.token_urlsafe(32)}
    argv = ("--server", "http://127.0.0.1:1", "agents", "--json")
    modules = loaded(tmp_path, "-m", "coordinator", *argv, env=token)
    assert "exit:3" in modules  # it got as far as the request: unavailable
    assert "coordinator.cli.api_client" in modules
    assert heavy(modules, CLIENT_ONLY) == []


def test_a_command_failing_on_its_input_loads_no_server(tmp_path: Path) -> None:
    """A local ``delegate`` whose input file is missing fails before any database is
    opened or any server, model client or risk code is loaded."""
    missing = tmp_path / "missing.json"
    argv = ("--data-dir", str(tmp_path / "data"), "delegate", "--to", "x", "--skill", "y")
    modules = loaded(tmp_path, "-m", "coordinator", *argv, "--input", str(missing))
    assert "exit:2" in modules
    assert "coordinator.service.facade" in modules  # it ran as a local command
    assert heavy(modules, SERVERS) == []


def test_the_risk_service_help_loads_no_server(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "-m", "remote_risk", "--help")
    assert "exit:0" in modules
    assert heavy(modules, RISK_SERVER) == []
