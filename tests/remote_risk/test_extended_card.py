"""GetExtendedAgentCard on every binding: only for a caller with a delegation token, and
signed by the service's key like the public card."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.bindings.protojson import from_proto
from agent_cards.keys import TrustedKeys
from agent_cards.signing import verify_card
from contracts.wire import AgentCard, to_wire
from remote_risk.settings import REST_PATH
from tests.remote_risk.delegated import Caller, delegated_service
from tests.servers import free_port


@pytest.fixture
def service() -> Iterator[tuple[Caller, Any, str]]:
    port = free_port()
    with delegated_service(grpc_port=port) as (caller, app):
        yield caller, app, f"127.0.0.1:{port}"


def check_signed(app: Any, document: dict[str, Any]) -> None:
    key = app.state.signing_keys.active.verification_key()
    assert verify_card(document, TrustedKeys([key])).kid == key.kid
    assert document["capabilities"]["extendedAgentCard"] is True
    assert "For authenticated callers" in document["description"]


def test_public_card_declares_the_extended_card(service: tuple[Caller, Any, str]) -> None:
    caller, _app, _ = service
    card = httpx.get(caller.base_url + "/.well-known/agent-card.json", timeout=10).json()
    assert card["capabilities"]["extendedAgentCard"] is True
    assert "For authenticated callers" not in card["description"]


def test_jsonrpc_extended_card_with_a_token(service: tuple[Caller, Any, str]) -> None:
    caller, app, _ = service
    response = caller.call("GetExtendedAgentCard", {}, caller.token("card"))
    assert response.status_code == 200, response.text
    check_signed(app, response.json()["result"])


def test_rest_extended_card_with_and_without_a_token(service: tuple[Caller, Any, str]) -> None:
    caller, app, _ = service
    url = caller.base_url + REST_PATH + "/extendedAgentCard"
    headers = {"A2A-Version": "1.0"}
    assert httpx.get(url, headers=headers, timeout=10).status_code == 401
    headers["Authorization"] = f"Bearer {caller.token('card')}"
    response = httpx.get(url, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    check_signed(app, response.json())


def test_grpc_extended_card_with_a_token(service: tuple[Caller, Any, str]) -> None:
    caller, app, address = service

    async def fetch() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = [("a2a-version", "1.0"), ("authorization", f"Bearer {caller.token('c')}")]
            return await stub.GetExtendedAgentCard(
                a2a_pb2.GetExtendedAgentCardRequest(), metadata=metadata, timeout=10
            )

    card = from_proto(asyncio.run(fetch()), AgentCard)  # proto3 defaults put back
    check_signed(app, to_wire(card))
