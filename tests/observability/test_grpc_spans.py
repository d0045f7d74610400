"""A gRPC call to remote_risk is a server span continuing the caller's traceparent."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import json_format

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from tests.observability.spans import Captured, eventually
from tests.remote_risk.conftest import risk_input
from tests.remote_risk.delegated import SKILL, delegated_service
from tests.servers import free_port

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_a_grpc_send_continues_the_callers_trace(captured: Captured) -> None:
    port = free_port()
    with delegated_service(grpc_port=port) as (caller, _app):
        document = {
            "message": {
                "messageId": "m-grpc-span",
                "role": "ROLE_USER",
                "parts": [{"data": risk_input(), "mediaType": "application/json"}],
                "metadata": {"handoffId": "h-span", "attempt": 1, "skillId": SKILL},
            }
        }
        request = json_format.ParseDict(document, a2a_pb2.SendMessageRequest())
        metadata = [
            ("a2a-version", "1.0"),
            ("authorization", f"Bearer {caller.token('h-span')}"),
            ("traceparent", PARENT),
        ]

        async def send() -> a2a_pb2.SendMessageResponse:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                return await stub.SendMessage(request, metadata=metadata, timeout=10)

        assert asyncio.run(send()).task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        eventually(lambda: bool(captured.named("remote", "grpc SendMessage")))
    (span,) = captured.named("remote", "grpc SendMessage")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.attributes is not None and span.attributes["rpc.method"] == "SendMessage"
    inner = [
        s.name for s in captured.spans("remote") if s.context.trace_id == span.context.trace_id
    ]
    assert "remote_risk.verify_token" in inner
