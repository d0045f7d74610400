"""The gRPC binding of a token-checking remote_risk, over a real loopback channel.

The token and A2A-Version travel in metadata; the checks are the JSON-RPC ones (the
same dispatcher): accepted with the right token, refused UNAUTHENTICATED without one
and PERMISSION_DENIED with another handoff's, each with a google.rpc.Status holding
ErrorInfo in grpc-status-details-bin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.keys import SigningKey
from coordinator.authority.holder import proof
from coordinator.authority.revocation import push_token
from tests import tokens
from tests.remote_risk.conftest import binding_of, risk_input
from tests.remote_risk.delegated import ISSUER, SKILL, Caller, delegated_service
from tests.servers import free_port
from tests.tokens import COORDINATOR_KEY


@pytest.fixture
def served() -> Iterator[tuple[Caller, str, Any]]:
    """A caller, the gRPC address and the app (whose own registry holds its counts)."""
    port = free_port()
    with delegated_service(grpc_port=port) as (caller, app):
        yield caller, f"127.0.0.1:{port}", app


@pytest.fixture
def service(served: tuple[Caller, str, Any]) -> tuple[Caller, str]:
    return served[0], served[1]


def send_request(handoff_id: str) -> a2a_pb2.SendMessageRequest:
    document = {
        "message": {
            "messageId": f"m-{handoff_id}",
            "role": "ROLE_USER",
            "parts": [{"data": risk_input(), "mediaType": "application/json"}],
            "metadata": {"handoffId": handoff_id, "attempt": 1, "skillId": SKILL},
        }
    }
    return json_format.ParseDict(document, a2a_pb2.SendMessageRequest())


def metadata(token: str | None) -> list[tuple[str, str]]:
    pairs = [("a2a-version", "1.0")]
    return pairs + ([("authorization", f"Bearer {token}")] if token else [])


async def _call(address: str, rpc: str, request: Any, token: str | None) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        return await getattr(stub, rpc)(request, metadata=metadata(token), timeout=10)


def refusal(address: str, rpc: str, request: Any, token: str | None) -> tuple[Any, str]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(_call(address, rpc, request, token))
    error = raised.value
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return error.code(), info.metadata.get("reason", info.reason)


def test_the_card_lists_grpc_last(service: tuple[Caller, str]) -> None:
    import httpx

    caller, address = service
    card = httpx.get(caller.base_url + "/.well-known/agent-card.json", timeout=10).json()
    bindings = [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]]
    assert [b for b, _ in bindings] == ["JSONRPC", "HTTP+JSON", "GRPC"]
    assert bindings[-1][1] == address


def test_a_delegated_send_completes(service: tuple[Caller, str]) -> None:
    caller, address = service
    token = caller.token("h-grpc-1")
    response = asyncio.run(_call(address, "SendMessage", send_request("h-grpc-1"), token))
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert binding_of({"metadata": json_format.MessageToDict(response.task.metadata)}) == {
        "handoffId": "h-grpc-1",
        "attempt": 1,
    }
    got = asyncio.run(
        _call(
            address,
            "GetTask",
            a2a_pb2.GetTaskRequest(id=response.task.id),
            caller.token("h-grpc-1"),
        )
    )
    assert got.id == response.task.id
    # a token of another handoff does not find it
    request = a2a_pb2.GetTaskRequest(id=response.task.id)
    code, _reason = refusal(address, "GetTask", request, caller.token("x"))
    assert code == grpc.StatusCode.NOT_FOUND


def test_no_token_is_unauthenticated(service: tuple[Caller, str]) -> None:
    _caller, address = service
    code, reason = refusal(address, "SendMessage", send_request("h-grpc-2"), None)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "token_missing")


def test_another_handoffs_token_is_permission_denied(service: tuple[Caller, str]) -> None:
    caller, address = service
    token = caller.token("other")
    code, _reason = refusal(address, "SendMessage", send_request("h-grpc-3"), token)
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_unknown_task_is_not_found_with_error_info(service: tuple[Caller, str]) -> None:
    caller, address = service
    request = a2a_pb2.GetTaskRequest(id="no-such-task")
    code, reason = refusal(address, "GetTask", request, caller.token("lookup"))
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")


def test_a_stream_is_server_streaming(service: tuple[Caller, str]) -> None:
    caller, address = service

    async def follow() -> list[Any]:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            call = stub.SendStreamingMessage(
                send_request("h-grpc-4"), metadata=metadata(caller.token("h-grpc-4")), timeout=10
            )
            return [event async for event in call]

    events = asyncio.run(follow())
    assert events[0].WhichOneof("payload") == "task"
    last = events[-1]
    state = last.status_update.status.state if last.HasField("status_update") else None
    assert state == a2a_pb2.TASK_STATE_COMPLETED


def test_an_unknown_field_is_ignored_and_counted(served: tuple[Caller, str, Any]) -> None:
    """A field number the proto lacks (a newer peer's) does not refuse the send."""
    caller, address, app = served
    registry = app.state.telemetry.metrics.registry

    def ignored() -> float:
        sample = registry.get_sample_value("remote_risk_ignored_fields_total", {"binding": "grpc"})
        return sample or 0.0

    raw = send_request("h-grpc-5").SerializeToString() + bytes([0xA8, 0x06, 0x01])
    before = ignored()

    async def send() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_unary(
                "/lf.a2a.v1.A2AService/SendMessage",
                request_serializer=lambda body: body,
                response_deserializer=a2a_pb2.SendMessageResponse.FromString,
            )
            return await call(raw, metadata=metadata(caller.token("h-grpc-5")), timeout=10)

    response = asyncio.run(send())
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert ignored() - before == 1


def test_each_call_is_counted_with_its_outcome(served: tuple[Caller, str, Any]) -> None:
    """As HTTP requests are: remote_risk_a2a_requests_total{method, outcome}."""
    caller, address, app = served
    registry = app.state.telemetry.metrics.registry

    def count(method: str, outcome: str) -> float:
        labels = {"method": method, "outcome": outcome}
        return registry.get_sample_value("remote_risk_a2a_requests_total", labels) or 0.0

    before = count("GetTask", "TASK_NOT_FOUND"), count("SendStreamingMessage", "ok")
    refusal(address, "GetTask", a2a_pb2.GetTaskRequest(id="nope"), caller.token("lookup"))

    async def follow() -> list[Any]:
        async with grpc.aio.insecure_channel(address) as channel:
            call = a2a_pb2_grpc.A2AServiceStub(channel).SendStreamingMessage(
                send_request("h-grpc-6"), metadata=metadata(caller.token("h-grpc-6")), timeout=10
            )
            return [event async for event in call]

    assert asyncio.run(follow())
    after = count("GetTask", "TASK_NOT_FOUND"), count("SendStreamingMessage", "ok")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def test_a_revoked_grant_is_refused_on_grpc_too(service: tuple[Caller, str]) -> None:
    """The gRPC binding goes through the one verifier: after the issuer's push, a token
    of the revoked handoff is UNAUTHENTICATED ``token_revoked``."""
    caller, address = service
    now = int(time.time())
    push = push_token(COORDINATOR_KEY, ISSUER, caller.audience, "run-g", ["h-grpc-r"], now)
    answer = httpx.post(caller.base_url + "/revocations", content=push, timeout=10)
    assert answer.status_code == 200, answer.text
    code, reason = refusal(
        address, "SendMessage", send_request("h-grpc-r"), caller.token("h-grpc-r")
    )
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "token_revoked")


def test_a_holder_bound_token_needs_its_proof_on_grpc(service: tuple[Caller, str]) -> None:
    """A token naming a holder key: refused without a proof, accepted with one made for
    ``POST {public origin}/lf.a2a.v1.A2AService/GetTask``."""
    caller, address = service
    holder = SigningKey.generate()
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
        handoff_id="h-grpc-bound",
        jti="jti-grpc-bound",
    )
    token = tokens.forge(tokens.header(), {**claims, "cnf": {"jkt": holder.kid}})
    request = a2a_pb2.GetTaskRequest(id="no-such-task")
    code, reason = refusal(address, "GetTask", request, token)
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "holder_proof_missing")
    url = f"{caller.base_url}/lf.a2a.v1.A2AService/GetTask"

    async def with_proof() -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            sent = [*metadata(token), ("dpop", proof(holder, "POST", url, token))]
            return await stub.GetTask(request, metadata=sent, timeout=10)

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        asyncio.run(with_proof())
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND  # authenticated: no such task
