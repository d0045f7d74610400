"""The official a2a-sdk 1.3.0 client talks to remote_risk over loopback.

The SDK is an independent implementation of A2A v1.0: if remote_risk's card, envelopes,
task shapes or error bodies drift from the protocol, the SDK client refuses them here.
Most tests use an anonymous service (``create_app()`` without trusted issuers); the last
ones run against the token-checking service with the delegation token in the SDK's httpx
client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from agent_cards.identity import identity_of
from agent_cards.keys import TrustedKeys
from member_kit.server.app import JSONRPC_PATH
from remote_risk.service import create_app
from remote_risk.settings import REST_PATH, Settings
from tests import tokens
from tests.remote_risk.conftest import risk_input
from tests.servers import free_port, running

ISSUER = "urn:a2a-federation:coordinator"


@pytest.fixture
def risk_url() -> Iterator[str]:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with running(create_app(Settings(public_base_url=base_url)), port=port) as url:
        yield url


def data_message(case: str) -> Any:
    return new_data_message(risk_input(case), media_type="application/json", role=Role.ROLE_USER)


def test_sdk_resolver_reads_the_card(risk_url: str) -> None:
    """The SDK's card resolver parses remote_risk's card and finds the JSON-RPC 1.0 interface."""

    async def resolve() -> Any:
        async with httpx.AsyncClient() as http:
            return await A2ACardResolver(http, risk_url).get_agent_card()

    card = asyncio.run(resolve())
    assert card.name == "remote-risk"
    interface, rest = card.supported_interfaces
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    assert (rest.protocol_binding, rest.url) == ("HTTP+JSON", risk_url + REST_PATH)
    assert interface.url == risk_url + JSONRPC_PATH
    assert [skill.id for skill in card.skills] == ["interpret-risk-policy"]


def test_sdk_client_sends_a_data_message_and_gets_the_task(risk_url: str) -> None:
    """SendMessage with a data part completes with the Finding; GetTask returns the same task."""

    async def exchange() -> tuple[Any, Any]:
        client = await create_client(risk_url, client_config=ClientConfig(streaming=False))
        try:
            request = SendMessageRequest(message=data_message("handoff"))
            events = [event async for event in client.send_message(request)]
            assert [event.WhichOneof("payload") for event in events] == ["task"]
            task = events[0].task
            fetched = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
            return task, fetched
        finally:
            await client.close()

    task, fetched = asyncio.run(exchange())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    (finding,) = get_data_parts(task.artifacts[0].parts)
    assert finding["status"] == "ok"
    assert finding["facts"] == {
        "refund_execution_permitted": False,
        "privacy_review_required": True,
    }
    assert finding["evidenceIds"] == ["risk-policy-007", "brief-001"]
    assert fetched.id == task.id
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(fetched.history) == 1


def test_sdk_client_sees_failure_and_maps_a2a_errors(risk_url: str) -> None:
    """A failed skill reaches the SDK as FAILED; -32001 and -32002 become the SDK's error types."""

    async def exchange() -> Any:
        client = await create_client(risk_url, client_config=ClientConfig(streaming=False))
        try:
            request = SendMessageRequest(message=data_message("failure"))
            task = [event async for event in client.send_message(request)][-1].task
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id="no-such-task"))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task.id))
            return task
        finally:
            await client.close()

    task = asyncio.run(exchange())
    assert task.status.state == TaskState.TASK_STATE_FAILED
    (finding,) = get_data_parts(task.status.message.parts)
    assert finding["errorCode"] == "policy_engine_unavailable"


@pytest.fixture
def trusted_risk_url() -> Iterator[str]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={ISSUER: TrustedKeys([tokens.COORDINATOR_KEY.verification_key()])},
    )
    with running(create_app(settings), port=port) as url:
        yield url


def identity_at(risk_url: str) -> str:
    """The service's identity as a caller learns it: the RFC 9278 thumbprint URI of the
    key its card is signed with (the one its JWK Set serves), computed by the caller."""
    served = httpx.get(risk_url + "/.well-known/jwks.json", timeout=10).json()
    (key,) = TrustedKeys.from_json(served)
    return identity_of(key)


def delegation_token(risk_url: str, handoff_id: str) -> str:
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=identity_at(risk_url),
        scope="risk:interpret",
        handoff_id=handoff_id,
        jti=f"jti-{handoff_id}",
    )
    return tokens.forge(tokens.header(), claims)


def handoff_message(case: str, handoff_id: str) -> Any:
    message = data_message(case)
    message.metadata.update({"handoffId": handoff_id, "attempt": 1})
    return message


def test_sdk_client_with_a_delegation_token_gets_the_task(trusted_risk_url: str) -> None:
    """With the token in its httpx client the SDK completes a task on the token-checking
    service, reads it back, and sees the handoff echoed in the task metadata."""
    token = delegation_token(trusted_risk_url, "handoff-sdk-1")

    async def exchange() -> tuple[Any, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=10) as http:
            config = ClientConfig(streaming=False, httpx_client=http)
            client = await create_client(trusted_risk_url, client_config=config)
            request = SendMessageRequest(message=handoff_message("handoff", "handoff-sdk-1"))
            task = [event async for event in client.send_message(request)][-1].task
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            await client.close()
            return task, fetched

    task, fetched = asyncio.run(exchange())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert fetched.id == task.id
    metadata = dict(task.metadata)
    assert {key: metadata[key] for key in ("handoffId", "attempt")} == {
        "handoffId": "handoff-sdk-1",
        "attempt": 1,
    }
    # the receipts extension's data, in the place the spec allows it: an SDK reads it
    assert "receipt" in dict(metadata["https://a2a-federation.dev/extensions/receipts/v1"])


def test_sdk_client_without_a_token_is_refused(trusted_risk_url: str) -> None:
    """Without a token the SDK reports the service's HTTP 401 as its client error."""

    async def exchange() -> None:
        client = await create_client(trusted_risk_url, client_config=ClientConfig(streaming=False))
        try:
            request = SendMessageRequest(message=handoff_message("handoff", "handoff-sdk-2"))
            with pytest.raises(A2AClientError, match="HTTP Error 401"):
                [event async for event in client.send_message(request)]
        finally:
            await client.close()

    asyncio.run(exchange())
