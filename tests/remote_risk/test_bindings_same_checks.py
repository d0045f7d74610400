"""One place per guarantee: each bad token gets the same refusal on every binding.

The same SendMessage, with the same bad token, is sent over JSON-RPC, HTTP+JSON and
gRPC to one token-checking service; the stable reason code is the same on each, and
each binding's status says the same thing (HTTP 401/403, gRPC UNAUTHENTICATED /
PERMISSION_DENIED).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from remote_risk.settings import REST_PATH
from tests import tokens
from tests.remote_risk.conftest import risk_input
from tests.remote_risk.delegated import ISSUER, SCOPE, SKILL, Caller, delegated_service
from tests.servers import free_port

HANDOFF = "h-same"
GRPC_TO_HTTP = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[Caller, str]]:
    port = free_port()
    with delegated_service(grpc_port=port) as (caller, _app):
        yield caller, f"127.0.0.1:{port}"


def claims(caller: Caller, **changes: Any) -> dict[str, Any]:
    base = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=SCOPE,
        handoff_id=HANDOFF,
        jti=f"jti-{time.monotonic_ns()}",
    )
    return tokens.changed(base, **changes)


BadToken = Callable[[Caller], str | None]
CASES: dict[str, BadToken] = {
    "token_missing": lambda caller: None,
    "token_expired": lambda c: tokens.forge(tokens.header(), claims(c, exp=int(time.time()) - 600)),
    "audience_mismatch": lambda c: tokens.forge(
        tokens.header(), claims(c, aud=c.audience + "/other")
    ),
    "handoff_mismatch": lambda c: c.token("another-handoff"),
    "signature_invalid": lambda c: tokens.alter_signature(c.token(HANDOFF)),
}


def message() -> dict[str, Any]:
    return {
        "message": {
            "messageId": f"m-{time.monotonic_ns()}",
            "role": "ROLE_USER",
            "parts": [{"data": risk_input(), "mediaType": "application/json"}],
            "metadata": {"handoffId": HANDOFF, "attempt": 1, "skillId": SKILL},
        }
    }


def headers(token: str | None) -> dict[str, str]:
    found = {"A2A-Version": "1.0"}
    return found | ({"Authorization": f"Bearer {token}"} if token else {})


def over_jsonrpc(caller: Caller, _address: str, token: str | None) -> tuple[int, str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message()}
    response = httpx.post(
        caller.base_url + "/a2a/jsonrpc", json=body, headers=headers(token), timeout=10
    )
    (info,) = response.json()["error"]["data"]
    return response.status_code, info["metadata"]["reason"]


def over_rest(caller: Caller, _address: str, token: str | None) -> tuple[int, str]:
    response = httpx.post(
        caller.base_url + REST_PATH + "/message:send",
        json=message(),
        headers=headers(token) | {"Content-Type": "application/a2a+json"},
        timeout=10,
    )
    (info,) = response.json()["error"]["details"]
    return response.status_code, info["metadata"]["reason"]


def over_grpc(_caller: Caller, address: str, token: str | None) -> tuple[int, str]:
    request = json_format.ParseDict(message(), a2a_pb2.SendMessageRequest())
    pairs = [(k.lower(), v) for k, v in headers(token).items()]

    async def send() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            return await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                request, metadata=pairs, timeout=10
            )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(send())
    trailers = dict(raised.value.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return GRPC_TO_HTTP[raised.value.code().name], info.metadata["reason"]


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_binding_refuses_a_bad_token_for_the_same_reason(
    service: tuple[Caller, str], reason: str
) -> None:
    caller, address = service
    outcomes = {
        binding.__name__: binding(caller, address, CASES[reason](caller))
        for binding in (over_jsonrpc, over_rest, over_grpc)
    }
    statuses = {status for status, _ in outcomes.values()}
    assert {found for _, found in outcomes.values()} == {reason}, outcomes
    assert len(statuses) == 1 and statuses <= {401, 403}, outcomes
