"""A remote that answers a 20,000-deep JSON document is refused, never a crash.

The standard decoder recurses once per level, so such a document used to raise
``RecursionError`` deep in the coordinator: the API answered 500 and the CLI exited 70.
Here a rogue HTTP server on loopback answers one in every place the coordinator reads
another party's JSON (its card, its JWK Set, a JSON-RPC reply, an HTTP+JSON reply, a
stream event, a push notification), and each is refused with ``json_too_deep``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, b64url_encode
from agent_cards.signing import sign_card
from agent_cards.transparency.statements import StatementInvalid, unverified_header
from contracts import strict_json
from contracts.wire import SendMessageRequest
from coordinator.audit.log.tree_heads import header_kid, read_unverified
from coordinator.audit.receipts import protected_header
from coordinator.errors import LedgerError, ProtocolError, UsageError
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.push import SIGNATURE_HEADER, PushReceiver
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.http_json import HttpJsonTransport
from coordinator.remote.wire.transport import HTTP_JSON, Interface
from coordinator.service.http.api import create_api
from coordinator.service.remote_audit import _object as reconcile_object
from coordinator.service.run_list import decode_cursor
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.server.webhooks import sign_notification
from tests.servers import free_port, running

DEPTH = 20_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
DEEP_OBJECT = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH
# Wider than any one array may be (10,000 items): refused json_too_wide, on every path.
WIDE = b"[" + b"0," * 20_000 + b"0]"
TOKEN = "operator-token-for-tests-0123456789abcdef"
KEY = SigningKey.generate()


def card(base: str) -> dict[str, Any]:
    return {
        "name": "rogue",
        "description": "answers deep documents",
        "supportedInterfaces": [
            {"url": f"{base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "version": "1",
        "capabilities": {},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "s", "name": "s", "description": "s", "tags": []}],
    }


def _deep(media_type: str = "application/json") -> Response:
    return Response(DEEP_OBJECT, media_type=media_type)


async def deep_card(request: Request) -> Response:
    return _deep()


async def good_card(request: Request) -> Response:
    base = str(request.base_url).rstrip("/")
    return Response(json.dumps(sign_card(card(base), KEY)), media_type="application/json")


async def wide_card(request: Request) -> Response:
    return Response(WIDE, media_type="application/json")


async def deep_jwks(request: Request) -> Response:
    return _deep()


async def deep_rpc(request: Request) -> Response:
    return _deep()


async def deep_event(request: Request) -> Response:
    return Response(b"data: " + DEEP + b"\n\n", media_type="text/event-stream")


def rogue_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/deep/.well-known/agent-card.json", deep_card),
            Route("/good/.well-known/agent-card.json", good_card),
            Route("/wide/.well-known/agent-card.json", wide_card),
            Route("/.well-known/jwks.json", deep_jwks),
            Route("/rpc", deep_rpc, methods=["POST"]),
            Route("/stream", deep_event, methods=["POST"]),
            Route("/rest/message:send", deep_rpc, methods=["POST"]),
        ]
    )


@pytest.fixture(scope="module")
def rogue() -> Iterator[str]:
    with running(rogue_app()) as base:
        yield base


@pytest.fixture
def api(tmp_path: Path) -> Iterator[str]:
    ws = Workspace(DataDir(tmp_path / "data"))
    with running(create_api(ws, CoordinatorSettings(operator_token=TOKEN))) as base:
        yield base
    ws.close()


def test_the_one_parser_refuses_deep_documents_without_recursing() -> None:
    for document in (DEEP, DEEP_OBJECT, DEEP.decode()):
        with pytest.raises(strict_json.JSONTooDeep) as refused:
            strict_json.loads(document)
        assert refused.value.reason == "json_too_deep"
    assert strict_json.loads(b"[" * 64 + b"]" * 64) is not None
    assert strict_json.loads(json.dumps({"s": "[" * 1000})) == {"s": "[" * 1000}


def test_api_refuses_a_deep_card_with_a_typed_reason(api: str, rogue: str) -> None:
    """POST /v1/agents for a card 20,000 levels deep: 4xx json_too_deep, not 500."""
    body = {"url": rogue + "/deep", "trust_key": KEY.public_jwk()}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.post(api + "/v1/agents", json=body, headers=headers, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["reason"] == "json_too_deep"


def test_api_refuses_a_wide_card_with_its_own_reason(api: str, rogue: str) -> None:
    """A card of 20,001 items: 4xx json_too_wide, the reason the parser gave."""
    body = {"url": rogue + "/wide", "trust_key": KEY.public_jwk()}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.post(api + "/v1/agents", json=body, headers=headers, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["reason"] == "json_too_wide"


def test_api_refuses_a_deep_jwks_with_a_typed_reason(api: str, rogue: str) -> None:
    """Trust on first use fetches the origin's JWK Set: a deep one is refused, not a 500."""
    body = {"url": rogue + "/good", "trust_on_first_use": True}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.post(api + "/v1/agents", json=body, headers=headers, timeout=30)
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["reason"] == "json_too_deep"


def test_cli_refuses_a_deep_card_in_one_line(tmp_path: Path, rogue: str) -> None:
    """``federation register`` of the deep card: one error line, exit 2, no traceback."""
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps(KEY.public_jwk()))
    command = [sys.executable, "-m", "coordinator", "register", rogue + "/deep"]
    done = subprocess.run(
        [*command, "--trust-key", str(key_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"FEDERATION_DATA_DIR": str(tmp_path / "data"), "PATH": "", **_pythonpath()},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("federation: error: json_too_deep: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def _pythonpath() -> dict[str, str]:
    return {name: os.environ[name] for name in ("PYTHONPATH", "HOME") if name in os.environ}


def _refused(call: Any) -> ProtocolError:
    async def attempt() -> ProtocolError:
        async with A2AClient() as client:
            try:
                await call(client)
            except ProtocolError as exc:
                return exc
        raise AssertionError("the deep reply was accepted")

    return asyncio.run(attempt())


def _request() -> SendMessageRequest:
    return SendMessageRequest.model_validate(
        {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    )


def test_deep_jsonrpc_reply_is_refused(rogue: str) -> None:
    refused = _refused(lambda client: client.send_message(rogue + "/rpc", _request()))
    assert refused.reason == "json_too_deep"


def test_deep_stream_event_is_refused(rogue: str) -> None:
    async def first_event(client: A2AClient) -> None:
        async for _ in client.stream_message(rogue + "/stream", _request()):
            pass

    assert _refused(first_event).reason == "json_too_deep"


def test_deep_http_json_reply_is_refused(rogue: str) -> None:
    def send(client: A2AClient) -> Any:
        transport = HttpJsonTransport(client, Interface(rogue + "/rest", HTTP_JSON))
        return transport.send_message(_request())

    assert _refused(send).reason == "json_too_deep"


@pytest.fixture
def receiver() -> Iterator[PushReceiver]:
    port = free_port()
    push_receiver = PushReceiver(f"http://127.0.0.1:{port}")
    with running(push_receiver.app, port=port):
        yield push_receiver


def _agent(base: str) -> RegisteredAgent:
    return RegisteredAgent(
        name="rogue",
        card_url=base + "/good/.well-known/agent-card.json",
        endpoint=base + "/rpc",
        card=card(base),
        registered_at="2026-01-01T00:00:00Z",
        pinned_jwks={"keys": [KEY.public_jwk()]},
    )


def _push(receiver: PushReceiver, agent: RegisteredAgent, body: bytes, token: str) -> Any:
    headers = {SIGNATURE_HEADER: token, "Content-Type": "application/a2a+json"}
    url = receiver.webhook_url(agent.name)

    async def post() -> Any:
        receiver.expect(agent, "task-1")
        return await asyncio.to_thread(httpx.post, url, content=body, headers=headers, timeout=30)

    return asyncio.run(post())


def test_deep_push_notification_is_refused(receiver: PushReceiver, rogue: str) -> None:
    """A registered agent signs a notification whose body is 20,000 levels deep."""
    agent = _agent(rogue)
    token = sign_notification(
        DEEP_OBJECT,
        key=KEY,
        issuer=identity_of(KEY.verification_key()),
        audience=receiver.webhook_url(agent.name),
        task_id="task-1",
        jti="jti-deep",
    )
    answer = _push(receiver, agent, DEEP_OBJECT, token)
    assert answer.status_code == 400
    assert answer.json() == {"refused": "json_too_deep"}


def test_wide_push_notification_is_refused_with_its_own_reason(
    receiver: PushReceiver, rogue: str
) -> None:
    """A registered agent signs a notification of 20,001 items: json_too_wide."""
    agent = _agent(rogue)
    token = sign_notification(
        WIDE,
        key=KEY,
        issuer=identity_of(KEY.verification_key()),
        audience=receiver.webhook_url(agent.name),
        task_id="task-1",
        jti="jti-wide",
    )
    answer = _push(receiver, agent, WIDE, token)
    assert answer.status_code == 400
    assert answer.json() == {"refused": "json_too_wide"}


def test_deep_push_signature_header_is_refused(receiver: PushReceiver, rogue: str) -> None:
    """Anyone can send a push whose JWS header is 20,000 levels deep, signed by no one."""
    token = b64url_encode(DEEP) + ".e30.c2ln"
    answer = _push(receiver, _agent(rogue), b"{}", token)
    assert answer.status_code == 400
    assert answer.json() == {"refused": "json_too_deep"}


def test_a_deep_signed_statement_header_is_malformed_not_a_crash() -> None:
    """A receipt or tree head whose JWS header is 20,000 levels deep: refused as malformed."""
    with pytest.raises(StatementInvalid):
        unverified_header(b64url_encode(DEEP) + ".e30.c2ln")


@pytest.mark.parametrize(
    ("text", "too_deep"),
    [
        ("[" * 64 + "]" * 64, False),
        ("[" * 65 + "]" * 65, True),
        ("[" + ",".join(["[" * 63 + "]" * 63] * 100) + "]", False),
        ("[" + ",".join(["[" * 64 + "]" * 64] * 3) + "]", True),
        ("[" + ",".join(["[]"] * 5000) + "," + "[" * 63 + "]" * 63 + "]", False),
        ("[" + ",".join(["[]"] * 5000) + "," + "[" * 64 + "]" * 64 + "]", True),
        ('{"a":' * 65 + "1" + "}" * 65, True),
        ("[" * 100 + "}", True),
        ("]" * 100 + "[" * 10, False),
        (json.dumps({"s": "[" * 1000, "t": "{" * 1000}), False),
    ],
)
def test_the_depth_rule_counts_exactly(text: str, too_deep: bool) -> None:
    if too_deep:
        with pytest.raises(strict_json.JSONTooDeep):
            strict_json.check_depth(text)
    else:
        strict_json.check_depth(text)


def test_deep_audit_documents_are_refused_not_a_crash() -> None:
    """A receipt's or a tree head's JWS parts, and a remote's audit answer, 20,000 deep."""
    deep_part = b64url_encode(DEEP)
    with pytest.raises(LedgerError) as receipt:
        protected_header({"protected": deep_part, "payload": "e30", "signature": "c2ln"})
    assert receipt.value.reason == "receipt_invalid"
    assert header_kid(deep_part + ".e30.c2ln") is None
    with pytest.raises(LedgerError) as head:
        read_unverified("e30." + deep_part + ".c2ln")
    assert head.value.reason == "head_invalid"
    with pytest.raises(ProtocolError) as answer:
        reconcile_object("rogue", httpx.Response(200, content=DEEP))
    assert answer.value.reason == "json_too_deep"


def test_a_deep_run_list_cursor_is_a_bad_cursor() -> None:
    with pytest.raises(UsageError) as refused:
        decode_cursor(b64url_encode(DEEP))
    assert refused.value.reason == "bad_cursor"
