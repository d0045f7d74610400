"""The coordinator registers and delegates to a2a-sdk 1.3.0 servers offering one binding
each: only HTTP+JSON, only gRPC, only A2A v0.3 JSON-RPC (the SDK's compat layer).

Each peer is its own process (``tests/interop/sdk_peer.py``); the coordinator is the
``federation`` CLI on a data directory. A delegation is ACCEPTED under a return schema it
meets and REJECTED under one it fails; a cancelled run cancels the remote task; the run's
document and its ledger both name the binding the handoff went on; the token and the
``A2A-Version`` arrive at the peer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.keys import SigningKey
from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from coordinator.errors import RemoteA2AError
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient

PEER_KEY = SigningKey.generate()
BINDINGS = {
    "http_json": ("HTTP+JSON", "1.0"),
    "grpc": ("GRPC", "1.0"),
    "v03": ("JSONRPC", "0.3"),
}
ECHO_SCHEMA = {"type": "object", "required": ["echo", "seen"]}
UNMET_SCHEMA = {"type": "object", "required": ["verdict"]}


@dataclass
class Peer:
    binding: str
    url: str
    data: Path

    def federation(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "FEDERATION_DATA_DIR": str(self.data)}
        return subprocess.run(
            [sys.executable, "-m", "coordinator", *args],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip

    def register(self, *extra: str) -> subprocess.CompletedProcess[str]:
        key_file = self.data / "peer-key.json"
        key_file.write_text(json.dumps(PEER_KEY.public_jwk()))
        return self.federation(
            "register", self.url, "--name", "echo", "--trust-key", str(key_file),
            *self.allowances(), *extra,
        )  # fmt: skip

    def allowances(self) -> list[str]:
        """``--allow-origin`` for each interface of the card off its origin (the gRPC
        port): what the operator allows after reading the card."""
        card = httpx.get(self.url + "/.well-known/agent-card.json", timeout=10).json()
        # a v0.3 card names its interfaces in url and additionalInterfaces
        listed = card.get("supportedInterfaces") or [card, *card.get("additionalInterfaces", [])]
        urls = [i["url"] for i in listed]
        off = [url for url in urls if not url.startswith(self.url)]
        return [arg for url in off for arg in ("--allow-origin", url)]

    def delegate(self, payload: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any]]:
        path = self.data / "input.json"
        path.write_text(json.dumps(payload))
        done = self.federation(
            "delegate", "--to", "echo", "--skill", "echo", "--input", str(path), "--json", *extra
        )
        assert done.stdout, done.stderr
        return done.returncode, json.loads(done.stdout)

    def schema(self, name: str, schema: dict[str, Any]) -> str:
        path = self.data / f"{name}.schema.json"
        path.write_text(json.dumps(schema))
        return str(path)


def private_key_file(key: SigningKey, path: Path) -> str:
    path.write_text(json.dumps({"kid": key.kid, "private_pem": key.private_pem().decode()}))
    return str(path)


def start_peer(binding: str, tmp_path: Path, *extra: str) -> Iterator[Peer]:
    key_file = private_key_file(PEER_KEY, tmp_path / "peer-private.json")
    command = ["-m", "tests.interop.sdk_peer", "--binding", binding, "--key", str(key_file)]
    process = subprocess.Popen(
        [sys.executable, *command, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("sdk peer listening on "), (
            process.stderr.read() if process.stderr else line
        )
        data = tmp_path / "coordinator"
        data.mkdir()
        yield Peer(binding, line.rsplit(" ", 1)[1], data)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(params=sorted(BINDINGS))
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Peer]:
    yield from start_peer(request.param, tmp_path)


@pytest.fixture(params=sorted(BINDINGS))
def streaming_peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Peer]:
    """A peer whose card declares streaming: the send is the binding's streaming call
    (SSE for HTTP+JSON and v0.3, a server stream for gRPC) and the task is followed on it."""
    yield from start_peer(request.param, tmp_path, "--streaming")


def test_delegation_is_accepted_and_names_its_binding(peer: Peer) -> None:
    """Register, delegate under a schema the echo meets: ACCEPTED; the peer saw our bearer
    token and A2A-Version; the run document and the ledger name the binding."""
    registered = peer.register("--return-schema", f"echo={peer.schema('echo', ECHO_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    code, document = peer.delegate({"question": "ping"})
    assert code == 0, (document["reason"], document["notes"])
    assert document["local_state"] == "ACCEPTED"
    assert document["remote_state"] == "TASK_STATE_COMPLETED"
    echoed = document["received_artifacts"][0]["parts"][0]["data"]
    binding, version = BINDINGS[peer.binding]
    assert echoed["echo"] == [{"question": "ping"}]
    assert echoed["seen"] == {"bearer": True, "version": version}
    interface = document["branches"][0]["interface"]
    assert (interface["binding"], interface["protocol_version"]) == (binding, version)

    shown = peer.federation("run", "show", document["run_id"], "--json")
    assert json.loads(shown.stdout)["branches"][0]["interface"] == interface
    ledger = peer.federation("audit", "show", document["run_id"], "--json")
    assert ledger.returncode == 0, ledger.stderr
    assert json.loads(ledger.stdout)["branches"][0]["interface"] == interface


def test_a_result_failing_return_admission_is_rejected(peer: Peer) -> None:
    """The same echo under a schema it does not meet ends REJECTED, nothing admitted."""
    registered = peer.register("--return-schema", f"echo={peer.schema('unmet', UNMET_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    code, document = peer.delegate({"question": "ping"})
    assert code != 0
    assert document["local_state"] == "REJECTED"
    assert document["remote_state"] == "TASK_STATE_COMPLETED"
    assert document["artifacts"][0]["decision"] == "rejected"


def test_a_cancelled_run_cancels_the_remote_task(peer: Peer) -> None:
    """A task the peer keeps WORKING is cancelled with the run: the handoff ends CANCELLED
    and the peer reports its task CANCELED. The peer answers the CancelTask late (2 s),
    after the driver has seen the cancel and concluded: the run's document says what the
    answer said. Before, it kept the WORKING the driver had seen last."""
    registered = peer.register("--return-schema", f"echo={peer.schema('echo', ECHO_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    _, document = peer.delegate({"hold": True, "slow_cancel": 2}, "--cancel-after", "1")
    assert document["local_state"] == "CANCELLED"
    assert document["remote_state"] == "TASK_STATE_CANCELED", document["notes"]
    ledger = peer.federation("audit", "show", document["run_id"], "--json")
    assert json.loads(ledger.stdout)["branches"][0]["state"] == "CANCELLED"


def test_a_run_cancelled_while_its_send_is_out_cancels_the_task_it_opened(peer: Peer) -> None:
    """The run is cancelled (after 1 s) while the peer still holds its answer to the send
    (3 s): the cancel had no remote task to name. The task the answer opens is cancelled
    when it is learned; before, it was left WORKING at the peer."""
    registered = peer.register("--return-schema", f"echo={peer.schema('echo', ECHO_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    _, document = peer.delegate({"hold": True, "answer_after": 3}, "--cancel-after", "1")
    assert document["local_state"] == "CANCELLED"
    assert document["remote_task_id"], document["notes"]
    assert document["remote_state"] == "TASK_STATE_CANCELED", document["notes"]


@pytest.mark.parametrize("binding", sorted(BINDINGS))
def test_the_extended_card_is_fetched_and_verified(binding: str, tmp_path: Path) -> None:
    """A card declaring an extended card: registration fetches it (authenticated, on the
    chosen binding), verifies it with the pinned key and keeps it, with the event."""
    for peer in start_peer(binding, tmp_path, "--extended"):
        registered = peer.register()
        assert registered.returncode == 0, registered.stderr
        stored = json.loads((peer.data / "agents.json").read_text())["echo"]
        skills = [skill["id"] for skill in stored["extended_card"]["skills"]]
        assert skills == ["echo", "echo-extended"]


def test_an_extended_card_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    """An extended card that does not verify with the key pinned for the public card
    refuses the registration with the verification's reason; nothing is stored."""
    other = private_key_file(SigningKey.generate(), tmp_path / "other.json")
    for peer in start_peer("http_json", tmp_path, "--extended", "--extended-key", other):
        registered = peer.register()
        assert registered.returncode == 2
        assert "card_kid_unknown" in registered.stderr
        assert not (peer.data / "agents.json").exists()


def test_a_streamed_delegation_is_accepted(streaming_peer: Peer) -> None:
    """The same delegation, sent and followed on the binding's stream, ends ACCEPTED."""
    peer = streaming_peer
    registered = peer.register("--return-schema", f"echo={peer.schema('echo', ECHO_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    code, document = peer.delegate({"question": "ping"})
    assert code == 0, (document["reason"], document["notes"])
    assert document["local_state"] == "ACCEPTED"
    echoed = document["received_artifacts"][0]["parts"][0]["data"]
    assert echoed["echo"] == [{"question": "ping"}]
    assert not any("polling instead" in note for note in document["notes"]), document["notes"]


def test_a_streamed_task_is_cancelled_with_its_run(streaming_peer: Peer) -> None:
    """A task held WORKING on an open stream is cancelled with the run: CANCELLED here,
    CANCELED at the peer."""
    peer = streaming_peer
    registered = peer.register("--return-schema", f"echo={peer.schema('echo', ECHO_SCHEMA)}")
    assert registered.returncode == 0, registered.stderr
    _, document = peer.delegate({"hold": True}, "--cancel-after", "1")
    assert document["local_state"] == "CANCELLED"
    assert document["remote_state"] == "TASK_STATE_CANCELED"


def _registered(peer: Peer) -> RegisteredAgent:
    """The peer as registration stored it (the interface it chose, the origins allowed)."""
    registered = peer.register()
    assert registered.returncode == 0, registered.stderr
    return RegisteredAgent.model_validate(
        json.loads((peer.data / "agents.json").read_text())["echo"]
    )


def test_remote_errors_are_typed_on_every_binding(peer: Peer) -> None:
    """An unknown task and a cancel of a finished one come back, on each binding, as the
    A2A errors JSON-RPC would name (-32001, -32002), with the ErrorInfo reason where the
    binding carries one (v0.3 has none)."""
    agent = _registered(peer)

    async def errors() -> list[RemoteA2AError]:
        caught: list[RemoteA2AError] = []
        async with A2AClient() as client:
            remote = transport_for(client, agent.interface, agent.destinations)
            with pytest.raises(RemoteA2AError) as unknown:
                await remote.get_task(GetTaskRequest(id="no-such-task"))
            caught.append(unknown.value)
            message = Message(
                message_id="m-1", role=Role.USER, parts=[Part(data={"question": "ping"})]
            )
            sent = await remote.send_message(SendMessageRequest(message=message))
            assert sent.task is not None
            for _ in range(50):
                task = await remote.get_task(GetTaskRequest(id=sent.task.id))
                if task.status.state is TaskState.COMPLETED:
                    break
                await asyncio.sleep(0.05)
            with pytest.raises(RemoteA2AError) as finished:
                await remote.cancel_task(CancelTaskRequest(id=sent.task.id))
            caught.append(finished.value)
        return caught

    unknown, finished = asyncio.run(errors())
    assert (unknown.code, finished.code) == (-32001, -32002)
    legacy = peer.binding == "v03"
    assert unknown.error_info_reason == (None if legacy else "TASK_NOT_FOUND")
    assert finished.error_info_reason == (None if legacy else "TASK_NOT_CANCELABLE")


@pytest.mark.parametrize("binding", ["http_json", "grpc"])
def test_the_cards_tenant_goes_with_every_call(binding: str, tmp_path: Path) -> None:
    """An interface naming a tenant: HTTP+JSON calls take the /{tenant} path variant, gRPC
    calls carry it in the request; the peer sees it and the delegation is ACCEPTED."""
    for peer in start_peer(binding, tmp_path, "--tenant", "team-a"):
        registered = peer.register("--return-schema", f"echo={peer.schema('e', ECHO_SCHEMA)}")
        assert registered.returncode == 0, registered.stderr
        code, document = peer.delegate({"question": "ping"})
        assert code == 0, (document["reason"], document["notes"])
        echoed = document["received_artifacts"][0]["parts"][0]["data"]
        assert echoed["seen"]["tenant"] == "team-a"
        assert document["branches"][0]["interface"]["tenant"] == "team-a"
