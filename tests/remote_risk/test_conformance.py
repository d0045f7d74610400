"""The conformance agent: remote_risk's server layer with the TCK's scripted behaviours."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from remote_risk.settings import JSONRPC_PATH
from tests import conformance_agent as conformance
from tests.servers import free_port, running


@pytest.fixture
def agent() -> Iterator[httpx.Client]:
    port = free_port()
    app = conformance.create_app(f"http://127.0.0.1:{port}", long_task_seconds=0.2)
    with (
        running(app, port=port) as url,
        httpx.Client(
            base_url=url + JSONRPC_PATH, headers={"A2A-Version": "1.0"}, timeout=10
        ) as client,
    ):
        yield client


def call(client: httpx.Client, method: str, message_id: str) -> Any:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    return client.post("/", json=body)


def test_message_prefixes_choose_the_behaviour(agent: httpx.Client) -> None:
    """tck-message-response answers with a Message, tck-input-required stops in
    INPUT_REQUIRED, tck-reject-task ends REJECTED, tck-artifact-data completes with data."""
    results = {
        prefix: call(agent, "SendMessage", f"{prefix}-x").json()["result"]
        for prefix in (
            "tck-message-response",
            "tck-input-required",
            "tck-reject-task",
            "tck-artifact-data",
        )
    }
    assert results["tck-message-response"]["message"]["parts"] == [
        {"text": "Direct message response"}
    ]
    assert results["tck-input-required"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert results["tck-reject-task"]["task"]["status"]["state"] == "TASK_STATE_REJECTED"
    data = results["tck-artifact-data"]["task"]["artifacts"][0]["parts"][0]["data"]
    assert data == {"key": "value", "count": 42}


def test_chunked_stream_and_stored_artifact(agent: httpx.Client) -> None:
    """The chunked scenario streams two chunks (append, lastChunk) between WORKING and
    COMPLETED, and the stored task holds the assembled artifact."""
    with agent.stream(
        "POST",
        "/",
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": "tck-stream-artifact-chunked-1",
                    "role": "ROLE_USER",
                    "parts": [{"text": "go"}],
                }
            },
        },
    ) as response:
        events = [
            json.loads(line[5:])["result"]
            for line in response.iter_lines()
            if line.startswith("data:")
        ]
    chunks = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert [(c["append"], c["lastChunk"]) for c in chunks] == [(False, False), (True, True)]
    task_id = events[0]["task"]["id"]
    body = {"jsonrpc": "2.0", "id": 8, "method": "GetTask", "params": {"id": task_id}}
    task = agent.post("/", json=body).json()["result"]
    assert [p["text"] for p in task["artifacts"][0]["parts"]] == ["chunk-1 ", "chunk-2"]


def test_it_refuses_to_listen_beyond_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    """Asked to listen on a non-loopback address without --allow-non-loopback, it exits 2."""
    with pytest.raises(SystemExit) as exited:
        conformance.main(["--host", "0.0.0.0"])
    assert exited.value.code == 2
    assert "refusing to listen" in capsys.readouterr().err


def test_every_binding_serves_the_same_scripts() -> None:
    """With a gRPC port the card lists JSON-RPC, HTTP+JSON and gRPC; HTTP+JSON answers
    the same scripted behaviour, and the extended card is declared and served."""
    import asyncio

    import grpc

    from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
    from remote_risk.settings import REST_PATH

    port, grpc_port = free_port(), free_port()
    app = conformance.create_app(f"http://127.0.0.1:{port}", grpc_port=grpc_port)
    with running(app, port=port) as url:
        card = httpx.get(url + "/.well-known/agent-card.json", timeout=10).json()
        bindings = [i["protocolBinding"] for i in card["supportedInterfaces"]]
        assert bindings == ["JSONRPC", "HTTP+JSON", "GRPC"]
        assert card["capabilities"]["extendedAgentCard"] is True
        message = {"messageId": "tck-reject-task-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}
        headers = {"A2A-Version": "1.0", "Content-Type": "application/a2a+json"}
        sent = httpx.post(
            url + REST_PATH + "/message:send",
            content=json.dumps({"message": message}),
            headers=headers,
            timeout=10,
        )
        assert sent.json()["task"]["status"]["state"] == "TASK_STATE_REJECTED"

        async def extended() -> Any:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                request = a2a_pb2.GetExtendedAgentCardRequest()
                return await stub.GetExtendedAgentCard(
                    request, metadata=[("a2a-version", "1.0")], timeout=10
                )

        assert "Extended card" in asyncio.run(extended()).description
