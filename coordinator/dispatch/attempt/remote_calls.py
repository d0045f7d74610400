"""The A2A calls one handoff makes, with nothing of the handoff's record in them.

:class:`~coordinator.dispatch.attempt.driver.HandoffDriver` decides what each answer means for the
record; here are only the calls: send (streaming when the card says so and a stream slot
is free), read a task back, cancel it, each on the binding chosen for the agent at
registration (:func:`remote_of`), which nothing above this module needs to know.
"""

from __future__ import annotations

import asyncio

from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
)
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.streaming import PollBackoff, RemoteUpdates
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.transport import Transport


def remote_of(client: A2AClient, agent: RegisteredAgent) -> Transport:
    """The agent's interface chosen at registration, on ``client``'s limits and pool."""
    return transport_for(client, agent.interface, agent.destinations)


async def send(
    client: A2AClient,
    agent: RegisteredAgent,
    message: Message,
    headers: dict[str, str],
    backoff: PollBackoff,
    notes: list[str],
    *,
    within: float,
    blocking: bool = False,
) -> tuple[Task | None, RemoteUpdates | None]:
    """The task ``message`` opened and, when streamed, the rest of its stream; raises
    TimeoutError after ``within`` seconds and the client's FederationError on failure.
    ``blocking``: one ``SendMessage`` that answers once the task settled (see
    :mod:`coordinator.dispatch.attempt.send_modes`), never streamed."""
    request = SendMessageRequest(
        message=message,
        configuration=SendMessageConfiguration(
            accepted_output_modes=["application/json"], return_immediately=not blocking
        ),
    )
    async with asyncio.timeout(max(0.001, within)):
        if blocking:
            return (await remote_of(client, agent).send_message(request, headers)).task, None
        if agent.agent_card.capabilities.streaming and client.open_stream_slot():
            return await open_stream(
                client, remote_of(client, agent), request, headers, backoff, notes
            )
        return (await remote_of(client, agent).send_message(request, headers)).task, None


async def open_stream(
    client: A2AClient,
    remote: Transport,
    request: SendMessageRequest,
    headers: dict[str, str],
    backoff: PollBackoff,
    notes: list[str],
) -> tuple[Task | None, RemoteUpdates | None]:
    """``SendStreamingMessage`` holding one of the client's stream slots: the first event
    must be the task; the rest of the stream follows it. The slot is released when the
    stream is closed, or at once if no task came."""
    events = remote.stream_message(request, headers)
    try:
        first = await anext(events)
    except BaseException:
        await events.aclose()
        client.close_stream_slot()
        raise
    if first.task is None:
        await events.aclose()
        client.close_stream_slot()
        return None, None
    updates = RemoteUpdates(
        client,
        remote,
        first.task,
        headers,
        source=lambda: events,
        backoff=backoff,
        notes=notes,
        on_release=client.close_stream_slot,
        confirm_settled=False,
    )
    return first.task, updates


async def get_task(
    client: A2AClient, agent: RegisteredAgent, task_id: str, headers: dict[str, str]
) -> Task:
    return await remote_of(client, agent).get_task(GetTaskRequest(id=task_id), headers)


async def cancel_task(
    client: A2AClient, agent: RegisteredAgent, task_id: str, headers: dict[str, str]
) -> Task:
    return await remote_of(client, agent).cancel_task(CancelTaskRequest(id=task_id), headers)
