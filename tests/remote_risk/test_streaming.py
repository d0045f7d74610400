"""SendStreamingMessage and SubscribeToTask over real SSE on loopback."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_cards.keys import TrustedKeys
from member_kit.server.app import JSONRPC_PATH
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests import tokens
from tests.remote_risk.conftest import RiskPeer, risk_input, risk_peer, user_message
from tests.servers import free_port, running

_ids = itertools.count(1000)


@pytest.fixture
def slow_peer() -> Iterator[RiskPeer]:
    """A risk service that keeps each task WORKING long enough to subscribe to it."""
    with risk_peer(skill_delay_seconds=1.5) as running_peer:
        yield running_peer


def open_stream(peer: RiskPeer, method: str, params: dict[str, Any]) -> tuple[Any, Iterator[Any]]:
    """POST a streaming call; the open response and an iterator over its parsed events."""
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    request = peer.http.build_request("POST", JSONRPC_PATH, json=body)
    response = peer.http.send(request, stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")

    def events() -> Iterator[Any]:
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                assert event["jsonrpc"] == "2.0" and event["id"] == body["id"]
                yield event["result"]

    return response, events()


def drain(response: Any, events: Iterator[Any]) -> list[Any]:
    """Every remaining event until the server closes the stream."""
    try:
        return list(events)
    finally:
        response.close()


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [next(iter(event)) for event in events]


def states(events: list[dict[str, Any]]) -> list[str]:
    return [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]


def test_streaming_send_yields_task_then_updates_in_order(peer: RiskPeer) -> None:
    """SendStreamingMessage sends the Task first, then WORKING, the Finding artifact and
    COMPLETED, and closes the stream after the terminal state."""
    response, events = open_stream(
        peer, "SendStreamingMessage", {"message": user_message(risk_input())}
    )
    received = drain(response, events)
    assert kinds(received) == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    task = received[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert states(received) == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    artifact = received[2]["artifactUpdate"]
    assert artifact["taskId"] == task["id"] and artifact["lastChunk"] is True
    assert artifact["artifact"]["parts"][0]["data"]["status"] == "ok"
    fetched = peer.result("GetTask", {"id": task["id"]})
    assert fetched["artifacts"] == [artifact["artifact"]]


def test_streaming_send_of_needs_input_ends_at_the_interruption(peer: RiskPeer) -> None:
    """A streamed task that needs input ends its stream at INPUT_REQUIRED."""
    response, events = open_stream(
        peer, "SendStreamingMessage", {"message": user_message(risk_input("missing"))}
    )
    received = drain(response, events)
    assert states(received)[-1] == "TASK_STATE_INPUT_REQUIRED"


def test_several_subscribers_each_get_every_event(slow_peer: RiskPeer) -> None:
    """Two SubscribeToTask streams on one task each get the Task first and then every later
    update in the same order, ending at COMPLETED: the later subscriber's updates are the
    tail of the earlier one's (its snapshot may already hold a state the first saw arrive)."""
    task = slow_peer.send(risk_input(), {"returnImmediately": True})
    streams = [open_stream(slow_peer, "SubscribeToTask", {"id": task["id"]}) for _ in range(2)]
    received = []
    for response, events in streams:
        received.append(drain(response, events))
    first, second = received
    assert kinds(first)[0] == "task" and first[0]["task"]["id"] == task["id"]
    assert kinds(second)[0] == "task" and second[0]["task"]["id"] == task["id"]
    later = second[1:]
    assert later and first[len(first) - len(later) :] == later
    assert states(first)[-1] == "TASK_STATE_COMPLETED"
    assert "artifactUpdate" in kinds(first)


def test_closing_one_stream_leaves_the_others_and_the_task(slow_peer: RiskPeer) -> None:
    """A subscriber that disconnects after the first event does not disturb another
    subscriber, which still reads to COMPLETED, nor the task."""
    task = slow_peer.send(risk_input(), {"returnImmediately": True})
    leaving, leaving_events = open_stream(slow_peer, "SubscribeToTask", {"id": task["id"]})
    staying, staying_events = open_stream(slow_peer, "SubscribeToTask", {"id": task["id"]})
    assert "task" in next(leaving_events)
    leaving.close()
    received = drain(staying, staying_events)
    assert states(received)[-1] == "TASK_STATE_COMPLETED"
    fetched = slow_peer.result("GetTask", {"id": task["id"]})
    assert fetched["status"]["state"] == "TASK_STATE_COMPLETED"


def test_subscriber_sees_a_cancel_and_the_stream_ends(slow_peer: RiskPeer) -> None:
    """A CancelTask while a subscriber listens reaches it as CANCELED, the last event."""
    task = slow_peer.send(risk_input(), {"returnImmediately": True})
    response, events = open_stream(slow_peer, "SubscribeToTask", {"id": task["id"]})
    assert "task" in next(events)
    canceller = threading.Thread(target=slow_peer.result, args=("CancelTask", {"id": task["id"]}))
    canceller.start()
    rest = drain(response, events)
    canceller.join()
    assert states(rest)[-1] == "TASK_STATE_CANCELED"


def test_subscribing_to_an_unknown_task_is_task_not_found(peer: RiskPeer) -> None:
    """SubscribeToTask for a task that does not exist answers -32001 as plain JSON."""
    response = peer.http.post(
        JSONRPC_PATH,
        json={"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "nope"}},
    )
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == -32001


def test_subscribing_to_a_terminal_task_is_plain_json_unsupported(peer: RiskPeer) -> None:
    """SubscribeToTask on a completed task answers -32004 with a JSON body, not SSE."""
    task = peer.send(risk_input())
    response = peer.http.post(
        JSONRPC_PATH,
        json={"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}},
    )
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == -32004


def test_streaming_calls_need_a_delegation_token_when_issuers_are_trusted() -> None:
    """With a trusted issuer, SendStreamingMessage and SubscribeToTask without a token are
    refused with HTTP 401 before any stream starts."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={"urn:issuer": TrustedKeys([tokens.COORDINATOR_KEY.verification_key()])},
    )
    with running(create_app(settings), port=port) as base_url:
        for method, params in [
            ("SendStreamingMessage", {"message": user_message(risk_input())}),
            ("SubscribeToTask", {"id": "any"}),
        ]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            response = httpx.post(
                base_url + JSONRPC_PATH,
                json=body,
                headers={"A2A-Version": "1.0"},
                timeout=10,
            )
            assert response.status_code == 401, method
            assert response.headers["content-type"].startswith("application/json")
