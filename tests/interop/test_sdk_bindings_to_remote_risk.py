"""The a2a-sdk 1.3.0 client against the token-checking remote_risk on its other bindings.

The SDK picks HTTP+JSON (or gRPC) from remote_risk's card because it is told to support
only that binding; a delegated SendMessage with a real token is ACCEPTED (the task
completes, the handoff echoed), and a token bound to another handoff is refused with
the binding's own error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.types import GetTaskRequest, SendMessageRequest, TaskState

from tests.interop.test_sdk_client_to_remote_risk import delegation_token, handoff_message
from tests.remote_risk.conftest import binding_of
from tests.remote_risk.delegated import delegated_service
from tests.servers import free_port


@pytest.fixture
def trusted() -> Iterator[str]:
    with delegated_service() as (caller, _app):
        yield caller.base_url


def rest_config(http: httpx.AsyncClient) -> ClientConfig:
    return ClientConfig(
        streaming=False, httpx_client=http, supported_protocol_bindings=["HTTP+JSON"]
    )


async def _send(url: str, token: str, handoff_id: str) -> tuple[Any, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        client = await create_client(url, client_config=rest_config(http))
        try:
            request = SendMessageRequest(message=handoff_message("handoff", handoff_id))
            task = [event async for event in client.send_message(request)][-1].task
            fetched = await client.get_task(GetTaskRequest(id=task.id))
            return task, fetched
        finally:
            await client.close()


def test_sdk_rest_client_with_a_delegation_token_is_accepted(trusted: str) -> None:
    token = delegation_token(trusted, "handoff-sdk-rest-1")
    task, fetched = asyncio.run(_send(trusted, token, "handoff-sdk-rest-1"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert binding_of({"metadata": dict(task.metadata)}) == {
        "handoffId": "handoff-sdk-rest-1",
        "attempt": 1,
    }
    assert fetched.id == task.id


def test_sdk_rest_client_with_another_handoffs_token_is_refused(trusted: str) -> None:
    token = delegation_token(trusted, "handoff-other")
    with pytest.raises(A2AClientError, match="403"):
        asyncio.run(_send(trusted, token, "handoff-sdk-rest-2"))


class _Bearer(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Adds the delegation token to every unary call's metadata, as an operator would."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = [*(details.metadata or ()), ("authorization", f"Bearer {self._token}")]
        return await continuation(details._replace(metadata=metadata), request)


@pytest.fixture
def trusted_grpc() -> Iterator[str]:
    with delegated_service(grpc_port=free_port()) as (caller, _app):
        yield caller.base_url


async def _send_grpc(url: str, token: str, handoff_id: str) -> tuple[Any, Any]:
    config = ClientConfig(
        streaming=False,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=lambda target: grpc.aio.insecure_channel(
            target, interceptors=[_Bearer(token)]
        ),
    )
    client = await create_client(url, client_config=config)
    try:
        request = SendMessageRequest(message=handoff_message("handoff", handoff_id))
        task = [event async for event in client.send_message(request)][-1].task
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        return task, fetched
    finally:
        await client.close()


def test_sdk_grpc_client_with_a_delegation_token_is_accepted(trusted_grpc: str) -> None:
    token = delegation_token(trusted_grpc, "handoff-sdk-grpc-1")
    task, fetched = asyncio.run(_send_grpc(trusted_grpc, token, "handoff-sdk-grpc-1"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert binding_of({"metadata": dict(task.metadata)}) == {
        "handoffId": "handoff-sdk-grpc-1",
        "attempt": 1,
    }
    assert fetched.id == task.id


def test_sdk_grpc_client_with_another_handoffs_token_is_refused(trusted_grpc: str) -> None:
    token = delegation_token(trusted_grpc, "handoff-other-grpc")
    with pytest.raises(A2AClientError, match="PERMISSION_DENIED: delegation token refused"):
        asyncio.run(_send_grpc(trusted_grpc, token, "handoff-sdk-grpc-2"))


class _BearerStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """The same for server-streaming calls."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = [*(details.metadata or ()), ("authorization", f"Bearer {self._token}")]
        return await continuation(details._replace(metadata=metadata), request)


async def _stream(url: str, binding: str, token: str, handoff_id: str) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(
                target, interceptors=[_Bearer(token), _BearerStream(token)]
            ),
        )
        client = await create_client(url, client_config=config)
        try:
            request = SendMessageRequest(message=handoff_message("ok", handoff_id))
            return [event async for event in client.send_message(request)]
        finally:
            await client.close()


@pytest.mark.parametrize("binding", ["HTTP+JSON", "GRPC"])
def test_sdk_streaming_client_on_each_binding(trusted_grpc: str, binding: str) -> None:
    """SendStreamingMessage over SSE (HTTP+JSON) or a gRPC server stream: the task first,
    then its updates until COMPLETED, for a delegated caller."""
    handoff_id = f"handoff-sdk-stream-{binding.lower().replace('+', '-')}"
    token = delegation_token(trusted_grpc, handoff_id)
    events = asyncio.run(_stream(trusted_grpc, binding, token, handoff_id))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
