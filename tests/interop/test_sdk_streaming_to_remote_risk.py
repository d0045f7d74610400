"""The a2a-sdk 1.3.0 client streams from remote_risk over loopback SSE."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_data_parts
from a2a.types import SendMessageRequest, SubscribeToTaskRequest, TaskState

from agent_cards.keys import TrustedKeys
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests import tokens
from tests.interop.test_sdk_client_to_remote_risk import (
    ISSUER,
    data_message,
    delegation_token,
    handoff_message,
)
from tests.servers import free_port, running


def serving(skill_delay_seconds: float) -> Iterator[str]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}", skill_delay_seconds=skill_delay_seconds
    )
    with running(create_app(settings), port=port) as url:
        yield url


@pytest.fixture
def risk_url() -> Iterator[str]:
    yield from serving(0.5)


@pytest.fixture
def slow_risk_url() -> Iterator[str]:
    """A skill that works long enough for a client to subscribe while it runs, however
    busy the machine: with 0.5 s, a loaded full run once met the task already COMPLETED
    (and a finished task has no updates to subscribe to)."""
    yield from serving(5.0)


async def streamed_send(url: str) -> list[Any]:
    """Every event of one streamed send by the SDK's client as it comes (its own httpx
    client and timeouts)."""
    client = await create_client(url, client_config=ClientConfig(streaming=True))
    try:
        request = SendMessageRequest(message=data_message("ok"))
        return [event async for event in client.send_message(request)]
    finally:
        await client.close()


def test_sdk_streaming_client_gets_task_then_updates(risk_url: str) -> None:
    """With streaming on, the SDK reads the Task, WORKING, the Finding artifact and
    COMPLETED from remote_risk's SSE stream."""

    events = asyncio.run(streamed_send(risk_url))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    (finding,) = get_data_parts(events[2].artifact_update.artifact.parts)
    assert finding["status"] == "ok"


def test_sdk_client_resubscribes_to_a_running_task(slow_risk_url: str) -> None:
    """The SDK's subscribe on a running task yields the Task first and ends at COMPLETED."""

    async def exchange() -> list[Any]:
        # The stream is quiet while the skill works (5 s), httpx's default read timeout
        # too: the client is given longer, so a loaded machine meets the resubscription,
        # not that timeout.
        async with httpx.AsyncClient(timeout=30) as http:
            config = ClientConfig(streaming=True, httpx_client=http)
            client = await create_client(slow_risk_url, client_config=config)
            try:
                request = SendMessageRequest(message=data_message("ok"))
                stream = client.send_message(request)
                first = await anext(stream)
                await stream.aclose()
                task_id = first.task.id
                return [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id))]
            finally:
                await client.close()

    events = asyncio.run(exchange())
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.fixture
def quiet_risk_url() -> Iterator[str]:
    """A skill quieter than the SDK's default client waits for a read (httpx: 5 s)."""
    yield from serving(7.0)


def test_sdk_client_with_its_default_timeout_keeps_a_quiet_stream(quiet_risk_url: str) -> None:
    """The SDK as it comes (its own httpx client, 5 s read timeout) streams a task that
    works 7 s in silence: the member's keep-alive comments keep the stream read, and the
    client ends at COMPLETED instead of a ReadTimeout."""

    events = asyncio.run(streamed_send(quiet_risk_url))
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


def test_sdk_streaming_client_with_a_delegation_token() -> None:
    """A streamed send to the token-checking service completes when the SDK's httpx client
    carries the delegation token for the handoff."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    settings = Settings(
        public_base_url=base_url,
        trusted_issuers={ISSUER: TrustedKeys([tokens.COORDINATOR_KEY.verification_key()])},
    )
    with running(create_app(settings), port=port) as url:
        token = delegation_token(url, "handoff-sdk-stream")

        async def exchange() -> list[Any]:
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(headers=headers, timeout=10) as http:
                config = ClientConfig(streaming=True, httpx_client=http)
                client = await create_client(url, client_config=config)
                request = SendMessageRequest(message=handoff_message("ok", "handoff-sdk-stream"))
                events = [event async for event in client.send_message(request)]
                await client.close()
                return events

        events = asyncio.run(exchange())
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
