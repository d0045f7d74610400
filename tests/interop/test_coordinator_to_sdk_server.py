"""The coordinator delegates to a server built with the official a2a-sdk 1.3.0.

The SDK server is an independent implementation of A2A v1.0: if our client, registry and
state mapping get the wire format wrong, these tests fail against it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

from contracts.handoff import HandoffState
from coordinator.client import A2AClient
from coordinator.datadir import DataDir
from coordinator.dispatch import run_remote_handoff
from coordinator.pilot import new_handoff
from coordinator.registry import Registry
from coordinator.runs import Run
from tests.servers import free_port, running


class EchoExecutor(AgentExecutor):
    """Echoes the data parts it receives back as one artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        received = get_data_parts(context.message.parts)
        await updater.add_artifact([new_data_part({"echo": received})], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def sdk_app(base_url: str) -> Starlette:
    card = AgentCard(
        name="SDK Echo",
        description="An a2a-sdk server used as an independent peer",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + "/a2a/jsonrpc"
            )
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="echo", name="Echo", description="echo data", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc")
    return Starlette(routes=routes)


@pytest.fixture
def sdk_server() -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running(sdk_app(base), port=port) as url:
        yield url


def test_registry_accepts_sdk_card(sdk_server: str, tmp_path: Path) -> None:
    """A card produced by the official SDK passes our strict v1.0 card validation."""

    async def register() -> Any:
        async with A2AClient() as client:
            return await Registry(DataDir(tmp_path)).register(client, sdk_server, name="echo")

    agent = asyncio.run(register())
    assert agent.endpoint == sdk_server + "/a2a/jsonrpc"
    assert agent.skill_ids() == ["echo"]


def test_delegation_to_sdk_server_completes(sdk_server: str, tmp_path: Path) -> None:
    """A handoff to the SDK server ends ACCEPTED with the remote task COMPLETED and echoed data."""

    async def delegate() -> Any:
        async with A2AClient() as client:
            agent = await Registry(DataDir(tmp_path)).register(client, sdk_server, name="echo")
            record = new_handoff(Run(owner="operator"), agent.name, "echo")
            return await run_remote_handoff(
                client, agent, record, {"question": "ping"}, sent_record_ids=None
            )

    outcome = asyncio.run(delegate())
    assert outcome.record.state is HandoffState.ACCEPTED
    assert outcome.record.remote_state == "TASK_STATE_COMPLETED"
    assert outcome.task is not None and outcome.task.artifacts
    assert outcome.task.artifacts[0].parts[0].data == {"echo": [{"question": "ping"}]}


def _federation(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FEDERATION_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_cli_register_and_delegate_to_sdk_server(sdk_server: str, tmp_path: Path) -> None:
    """`federation register` then `delegate --json` complete a handoff to the SDK peer."""
    registered = _federation(tmp_path, "register", sdk_server, "--name", "echo")
    assert registered.returncode == 0, registered.stderr
    listed = _federation(tmp_path, "agents")
    assert "echo" in listed.stdout

    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps({"question": "ping"}))
    delegated = _federation(
        tmp_path,
        "delegate",
        "--to",
        "echo",
        "--skill",
        "echo",
        "--input",
        str(input_file),
        "--json",
    )
    assert delegated.returncode == 0, delegated.stderr
    document = json.loads(delegated.stdout)
    assert document["remote_state"] == "TASK_STATE_COMPLETED"
    assert document["local_state"] == "ACCEPTED"
    assert document["artifacts"][0]["parts"][0]["data"] == {"echo": [{"question": "ping"}]}
