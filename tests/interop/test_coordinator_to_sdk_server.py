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
from a2a.utils.signing import create_agent_card_signer
from starlette.applications import Starlette

from agent_cards.keys import SigningKey, TrustedKeys
from contracts.handoff import HandoffState
from contracts.returns import schema_contract
from coordinator.dispatch.attempt.driver import WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.errors import RegistryError
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from tests.runs import new_run
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


SDK_KEY = SigningKey.generate()


def sdk_app(base_url: str) -> Starlette:
    """An SDK server whose card is signed by the SDK's own signer (JWS over JCS)."""
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
    signer = create_agent_card_signer(
        SDK_KEY.private_pem(), {"alg": "EdDSA", "kid": SDK_KEY.kid, "typ": "JOSE"}
    )
    card = signer(card)
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


PINNED = TrustAnchor(keys=TrustedKeys.from_json(SDK_KEY.public_jwk()))


def test_registry_accepts_sdk_card(sdk_server: str, tmp_path: Path) -> None:
    """A card produced and signed by the official SDK passes our validation and signature check."""

    async def register() -> Any:
        async with A2AClient() as client:
            registry = Registry(DataDir(tmp_path))
            return await registry.register(client, sdk_server, name="echo", anchor=PINNED)

    registration = asyncio.run(register())
    assert registration.status == "registered"
    assert registration.agent.endpoint == sdk_server + "/a2a/jsonrpc"
    assert registration.agent.skill_ids() == ["echo"]
    assert registration.agent.verified_kid == SDK_KEY.kid


def test_sdk_card_signed_by_another_key_is_refused(sdk_server: str, tmp_path: Path) -> None:
    """The same SDK card is refused when the operator pinned a different key."""
    other = TrustAnchor(keys=TrustedKeys.from_json(SigningKey.generate().public_jwk()))

    async def register() -> Any:
        async with A2AClient() as client:
            return await Registry(DataDir(tmp_path)).register(client, sdk_server, anchor=other)

    with pytest.raises(RegistryError) as caught:
        asyncio.run(register())
    assert caught.value.reason == "card_kid_unknown"
    assert not (tmp_path / "agents.json").exists()


ECHO_SCHEMA = {"type": "object", "required": ["echo"]}


def test_delegation_to_sdk_server_completes(sdk_server: str, tmp_path: Path) -> None:
    """A handoff to the SDK server, under a declared schema, ends ACCEPTED with the remote
    task COMPLETED and echoed data."""

    async def delegate() -> Any:
        async with A2AClient() as client:
            registry = Registry(DataDir(tmp_path))
            registered = await registry.register(client, sdk_server, name="echo", anchor=PINNED)
            agent = registered.agent
            run = new_run(owner="operator")
            payload = {"question": "ping"}
            contract = schema_contract(ECHO_SCHEMA)
            proposal = propose(run, agent, "echo", payload, WaitPolicy(), contract=contract)
            return await run_remote_handoff(client, agent, proposal, payload, run=run)

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
    """`federation register` (declaring the skill's return schema) then `delegate --json`
    complete a handoff to the SDK peer."""
    key_file = tmp_path / "sdk-key.json"
    key_file.write_text(json.dumps(SDK_KEY.public_jwk()))
    schema_file = tmp_path / "echo.schema.json"
    schema_file.write_text(json.dumps(ECHO_SCHEMA))
    registered = _federation(
        tmp_path, "register", sdk_server, "--name", "echo", "--trust-key", str(key_file),
        "--return-schema", f"echo={schema_file}",
    )  # fmt: skip
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
    assert document["received_artifacts"][0]["parts"][0]["data"] == {"echo": [{"question": "ping"}]}
    assert document["artifacts"][0]["decision"] == "admitted"
    assert document["artifacts"][0]["content_hash"].startswith("sha256:")
