"""SendStreamingMessage and SubscribeToTask over real SSE on loopback."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from agent_cards.keys import TrustedKeys
from coordinator.remote.http.sse import SSEDecoder
from member_kit import errors
from member_kit.server.app import JSONRPC_PATH
from member_kit.server.streams import KEEP_ALIVE_SECONDS, kept_alive
from member_kit.settings import REST_PATH
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


@pytest.fixture
def quiet_peer() -> Iterator[RiskPeer]:
    """A risk service whose skill works in silence for longer than a keep-alive pause."""
    with risk_peer(skill_delay_seconds=KEEP_ALIVE_SECONDS + 1.5) as running_peer:
        yield running_peer


def raw_stream(peer: RiskPeer, binding: str) -> bytes:
    """The whole body of a streamed send on ``binding``, as it came over the wire."""
    message = {"message": user_message(risk_input())}
    if binding == "jsonrpc":
        path, media = JSONRPC_PATH, "application/json"
        body: dict[str, Any] = {
            "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message
        }  # fmt: skip
    else:
        path, media, body = REST_PATH + "/message:stream", "application/a2a+json", message
    headers = {"Content-Type": media, "A2A-Version": "1.0"}
    with peer.http.stream("POST", path, json=body, headers=headers) as response:
        assert response.status_code == 200
        return response.read()


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_a_quiet_stream_sends_keep_alive_comments(quiet_peer: RiskPeer, binding: str) -> None:
    """While the task works in silence, the stream sends SSE comment lines, and only
    there: the events are those of any stream, and the coordinator's reader, which
    skips comments, reads the same four events from the same bytes."""
    raw = raw_stream(quiet_peer, binding)
    lines = [line for line in raw.decode().split("\n") if line]
    comments = [index for index, line in enumerate(lines) if line.startswith(":")]
    data = [index for index, line in enumerate(lines) if line.startswith("data:")]
    assert comments and {lines[index] for index in comments} == {": keep-alive"}
    assert len(lines) == len(comments) + len(data)
    events = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    if binding == "jsonrpc":
        events = [event["result"] for event in events]
    assert kinds(events) == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert data[1] < comments[0] and comments[-1] < data[2]  # between WORKING and the outcome
    decoded = SSEDecoder(max_event_bytes=1 << 20).feed(raw)
    assert [json.loads(event) for event in decoded] == [
        json.loads(lines[index][5:]) for index in data
    ]


def test_keep_alive_pauses_neither_cancel_the_wait_nor_hide_an_error() -> None:
    """Pauses interleave with the events without losing one; closing while an event is
    awaited closes the events too; an error of the events comes through."""
    closed: list[str] = []

    async def events(fail: bool) -> AsyncIterator[str]:
        try:
            yield "first"
            await asyncio.sleep(0.05)  # three pauses of 0.015 s pass meanwhile
            yield "second"
            if fail:
                raise errors.InternalError("broken")
            await asyncio.sleep(3600)
            yield "never"
        finally:
            closed.append("events")

    async def read(fail: bool) -> list[str | None]:
        seen: list[str | None] = []
        stream = kept_alive(events(fail), every=0.015)
        async for event in stream:
            seen.append(event)
            if seen.count(None) > 5:
                await stream.aclose()
                break
        return seen

    seen = asyncio.run(read(fail=False))
    assert [event for event in seen if event is not None] == ["first", "second"]
    assert seen[0] == "first" and None in seen[1 : seen.index("second")]
    assert closed == ["events"]
    with pytest.raises(errors.InternalError):
        asyncio.run(read(fail=True))
