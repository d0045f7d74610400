"""The CLI turns bad input into one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agent_cards.keys import SigningKey
from agent_cards.signing import sign_card
from coordinator.cli.main import main
from tests.servers import free_port, running

UNSPOKEN_CARD = {
    "name": "old",
    "description": "a card offering only bindings and versions we do not speak",
    "supportedInterfaces": [
        {"url": "http://127.0.0.1:9/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.2"},
        {"url": "http://127.0.0.1:9/slim", "protocolBinding": "SLIMRPC", "protocolVersion": "1.0"},
        {
            "url": "http://127.0.0.1:9/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "0.3",
        },
    ],
    "version": "1",
    "capabilities": {},
    "defaultInputModes": ["application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [],
}


async def not_json(request: Request) -> Response:
    return PlainTextResponse("<html>hello</html>")


CARD_KEY = SigningKey.generate()


async def old_card(request: Request) -> Response:
    return JSONResponse(sign_card(UNSPOKEN_CARD, CARD_KEY))


async def wrong_shape(request: Request) -> Response:
    # members ProtoJSON may omit read as their defaults; a list given as a string cannot
    return JSONResponse({"name": "x", "url": "http://127.0.0.1:9/", "skills": "none"})


@pytest.fixture
def bad_cards() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/notjson/.well-known/agent-card.json", not_json),
            Route("/old/.well-known/agent-card.json", old_card),
            Route("/shape/.well-known/agent-card.json", wrong_shape),
        ]
    )
    with running(app) as url:
        yield url


def run_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, str]:
    code = main(["--data-dir", str(tmp_path), *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def test_unreachable_url(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Registering an address nobody listens on fails with one line naming the cause."""
    code, err = run_cli(capsys, tmp_path, "register", f"http://127.0.0.1:{free_port()}")
    assert code == 3, "an unreachable remote is exit 3"
    assert err.count("\n") == 1 and "cannot connect" in err
    assert err.startswith("federation: error: card_unreachable: ")


def test_card_that_is_not_json(
    bad_cards: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A card that is not JSON is refused with the reason card_not_json."""
    code, err = run_cli(capsys, tmp_path, "register", bad_cards + "/notjson")
    assert code == 2 and "error: card_not_json: " in err


def test_card_without_an_interface_we_speak(
    bad_cards: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A card offering no binding and version we speak (JSON-RPC, HTTP+JSON or gRPC at
    1.x, JSON-RPC at 0.3) is refused and nothing is registered."""
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps(CARD_KEY.public_jwk()))
    code, err = run_cli(
        capsys, tmp_path, "register", bad_cards + "/old", "--trust-key", str(key_file)
    )
    assert code == 2 and "error: no_supported_interface: " in err
    assert run_cli(capsys, tmp_path, "agents")[0] == 0
    assert not (tmp_path / "agents.json").exists()


def test_card_with_wrong_shape(
    bad_cards: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A v0.3-shaped card whose members have the wrong type is refused as card_invalid."""
    code, err = run_cli(capsys, tmp_path, "register", bad_cards + "/shape")
    assert code == 2 and "error: card_invalid: " in err


def test_delegate_to_unknown_agent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Delegating to a name that was never registered fails with unknown_agent."""
    input_file = tmp_path / "in.json"
    input_file.write_text(json.dumps({"a": 1}))
    code, err = run_cli(
        capsys, tmp_path, "delegate", "--to", "nobody", "--skill", "s", "--input", str(input_file)
    )
    assert code == 2 and "error: unknown_agent: " in err


def test_delegate_with_bad_input_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An input file with duplicate keys is refused before anything is sent."""
    input_file = tmp_path / "in.json"
    input_file.write_text('{"a": 1, "a": 2}')
    code, err = run_cli(
        capsys, tmp_path, "delegate", "--to", "x", "--skill", "s", "--input", str(input_file)
    )
    assert code == 2 and "error: input_not_json: " in err
