"""One place per guarantee: each bad token gets the same refusal on every binding.

The same SendMessage, with the same bad token, is sent over every binding the member's
served card lists (JSON-RPC, HTTP+JSON and gRPC, at the addresses the card gives) to one
token-checking service; the stable reason code is the same on each, and each binding's
status says the same thing (HTTP 401/403, gRPC UNAUTHENTICATED / PERMISSION_DENIED).
Each member of ``tests/members.py`` is held to it: remote_risk and the terms member built
on the kit, with the same reasons.
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

from agent_cards import tls
from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from contracts.wire import AGENT_CARD_PATH
from tests import tokens
from tests.members import MEMBERS
from tests.remote_risk.delegated import ISSUER, Caller, delegated_service
from tests.servers import free_port

HANDOFF = "h-same"
GRPC_TO_HTTP = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}
# Each binding a card may list: where on the interface's URL a send goes
Interfaces = dict[str, str]


@pytest.fixture(scope="module", params=sorted(MEMBERS))
def service(request: pytest.FixtureRequest) -> Iterator[tuple[Caller, Interfaces]]:
    """Each member in turn, with gRPC on a port of its own; and the bindings its served
    card lists, each at the URL the card gives."""
    with delegated_service(member=MEMBERS[request.param], grpc_port=free_port()) as (caller, _):
        yield caller, served_interfaces(caller.base_url)


def served_interfaces(base_url: str) -> Interfaces:
    """Each binding the member's served card lists, and its URL (for gRPC, host:port)."""
    card = httpx.get(base_url + AGENT_CARD_PATH, timeout=10, verify=VERIFY).json()
    return {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}


def claims(caller: Caller, **changes: Any) -> dict[str, Any]:
    base = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
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


def message(caller: Caller) -> dict[str, Any]:
    """A send of the member's skill with an input it accepts."""
    data = caller.member.valid_input()
    return {
        "message": {
            "messageId": f"m-{time.monotonic_ns()}",
            "role": "ROLE_USER",
            "parts": [{"data": data, "mediaType": "application/json"}],
            "metadata": {"handoffId": HANDOFF, "attempt": 1, "skillId": caller.member.skill},
        }
    }


def headers(token: str | None) -> dict[str, str]:
    found = {"A2A-Version": "1.0"}
    return found | ({"Authorization": f"Bearer {token}"} if token else {})


# Each binding's refusal of a SendMessage with ``params`` (its JSON-RPC params, the same
# for the others) under ``token``: the status (gRPC's as HTTP's) and the reason code.
# One TLS context for every request (agent_cards.tls): httpx would build one per call,
# about 20 ms of CPU each, for every refusal sent.
VERIFY = tls.verified()
Refusal = Callable[[str, dict[str, Any], str | None], tuple[int, str]]


def over_jsonrpc(url: str, params: dict[str, Any], token: str | None) -> tuple[int, str]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    response = httpx.post(url, json=body, headers=headers(token), timeout=10, verify=VERIFY)
    (info,) = response.json()["error"]["data"]
    return response.status_code, info["metadata"]["reason"]


def over_rest(url: str, params: dict[str, Any], token: str | None) -> tuple[int, str]:
    response = httpx.post(
        url + "/message:send",
        json=params,
        headers=headers(token) | {"Content-Type": "application/a2a+json"},
        timeout=10,
        verify=VERIFY,
    )
    (info,) = response.json()["error"]["details"]
    return response.status_code, info["metadata"]["reason"]


def over_grpc(address: str, params: dict[str, Any], token: str | None) -> tuple[int, str]:
    request = json_format.ParseDict(params, a2a_pb2.SendMessageRequest())
    pairs = [(k.lower(), v) for k, v in headers(token).items()]

    async def send() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            return await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                request, metadata=pairs, timeout=10
            )

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(send())
    code = raised.value.code().name
    trailers = dict(raised.value.trailing_metadata() or ())
    if "grpc-status-details-bin" not in trailers:  # refused by gRPC core, not by the member
        return GRPC_TO_HTTP.get(code, 0), f"no reason ({code})"
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return GRPC_TO_HTTP[code], info.metadata["reason"]


BINDINGS: dict[str, Refusal] = {"JSONRPC": over_jsonrpc, "HTTP+JSON": over_rest, "GRPC": over_grpc}


def test_the_card_lists_every_binding_served(service: tuple[Caller, Interfaces]) -> None:
    """The card names the three bindings (none this test cannot speak), so that the test
    below covers every binding the member serves."""
    assert set(service[1]) == set(BINDINGS)


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_binding_refuses_a_bad_token_for_the_same_reason(
    service: tuple[Caller, Interfaces], reason: str
) -> None:
    caller, listed = service
    outcomes = {
        binding: BINDINGS[binding](url, message(caller), CASES[reason](caller))
        for binding, url in listed.items()
    }
    statuses = {status for status, _ in outcomes.values()}
    assert {found for _, found in outcomes.values()} == {reason}, outcomes
    assert len(statuses) == 1 and statuses <= {401, 403}, outcomes
