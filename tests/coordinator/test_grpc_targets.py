"""A GRPC interface is checked as the channel will dial it, never as a URL parser reads it.

A card on its own origin that lists ``dns://<own host:port>/<other host:port>`` looks like
its own origin to a URL parser while gRPC dials the other host. Real servers on loopback:
the card's origin (HTTP, in a thread), the other host (a TLS gRPC server that records
every call it gets, with its metadata), and the coordinator's CLI as its own process
(trusting the other host's certificate, so that a call reaching it would be seen).
What must hold: the card is refused (``grpc_target_invalid``) before any call, a stored
agent with such an interface is sent nothing on delegation, and a channel dials the host
and port the rule checked.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards.keys import SigningKey
from agent_cards.signing import sign_card
from contracts.wire import PROTOCOL_VERSION, AgentInterface, GetTaskRequest, to_wire
from coordinator.authority.identity import coordinator_keys
from coordinator.errors import FederationError, RegistryError
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.endpoints import GRPC_TARGET_INVALID, grpc_target
from coordinator.remote.wire.grpc_transport import GrpcTransport
from coordinator.remote.wire.transport import GRPC, Interface
from coordinator.storage.datadir import DataDir
from remote_risk.service import risk_card
from tests.certificates import self_signed
from tests.processes import PAYLOAD
from tests.servers import free_port, running

SKILL = "interpret-risk-policy"


@pytest.mark.parametrize(
    ("url", "target", "tls"),
    [
        ("127.0.0.1:50051", "dns:///127.0.0.1:50051", False),
        ("localhost:50051", "dns:///localhost:50051", False),
        ("agent.example:443", "dns:///agent.example:443", True),
        ("grpc://Agent.Example.:50051/", "dns:///agent.example:50051", False),
        ("grpcs://127.1:50051", "dns:///127.0.0.1:50051", True),
        ("https://[::1]:7", "dns:///[::1]:7", True),
        ("grpcs://agent.example", "dns:///agent.example:443", True),
        ("unix:443", "dns:///unix:443", True),
    ],
)
def test_a_grpc_interface_dials_the_host_and_port_it_names(
    url: str, target: str, tls: bool
) -> None:
    """The forms A2A gives a gRPC URL; the channel target is built from the checked parts."""
    dialed = grpc_target(url)
    assert (dialed.target, dialed.tls) == (target, tls)


@pytest.mark.parametrize(
    "url",
    [
        "dns://127.0.0.1:8000/127.0.0.1:9000",
        "dns:///127.0.0.1:9000",
        "dns:127.0.0.1:9000",
        "ipv4:127.0.0.1:9000",
        "ipv6:[::1]:9000",
        "unix:///tmp/agent.sock",
        "unix-abstract:agent",
        "xds:///agent",
        "grpc://127.0.0.1:8000/127.0.0.1:9000",
        "grpc://user@127.0.0.1:8000",
        "grpc://127.0.0.1:8000?x=1",
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:99999",
        "127.0.0.1:8000,127.0.0.1:9000",
    ],
)
def test_grpcs_own_target_syntax_is_refused(url: str) -> None:
    """Anything but ``host:port`` after an allowed scheme: gRPC would read it its own way."""
    with pytest.raises(RegistryError) as refused:
        grpc_target(url)
    assert refused.value.reason == GRPC_TARGET_INVALID


# --- real servers -------------------------------------------------------------------------


class Recorder(grpc.GenericRpcHandler):
    """Every call that reaches the other host: its method and metadata (then UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def service(self, handler_call_details: Any) -> None:
        metadata = dict(handler_call_details.invocation_metadata)
        self.calls.append((handler_call_details.method, metadata))


def _certificate(root: Path) -> tuple[bytes, bytes]:
    """A self-signed certificate for 127.0.0.1 (written to ``root/roots.pem``) and its key."""
    pem, private = self_signed()
    (root / "roots.pem").write_bytes(pem)
    return private, pem


@contextmanager
def other_host(root: Path | None) -> Iterator[tuple[str, Recorder]]:
    """A gRPC server on loopback that records what reaches it: TLS with a certificate
    written under ``root``, plaintext without one."""
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[recorder])
    if root is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        credentials = grpc.ssl_server_credentials([_certificate(root)])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        yield f"127.0.0.1:{port}", recorder
    finally:
        server.stop(grace=None)


def _card_app(base_url: str, grpc_url: str, key: SigningKey) -> Starlette:
    """The card's origin: a signed card whose one interface is ``grpc_url`` (GRPC), and
    which declares an extended card (fetched at registration with a delegation token)."""
    card = risk_card(base_url)
    interface = AgentInterface(
        url=grpc_url, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION
    )
    capabilities = card.capabilities.model_copy(update={"extended_agent_card": True})
    changed = {"supported_interfaces": [interface], "capabilities": capabilities}
    signed = sign_card(to_wire(card.model_copy(update=changed)), key)

    async def agent_card(request: Request) -> Response:
        return JSONResponse(signed)

    return Starlette(routes=[Route("/.well-known/agent-card.json", agent_card)])


def federation(data: DataDir, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FEDERATION_DATA_DIR": str(data.root),
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(root / "roots.pem"),
    }
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True, text=True, timeout=90, env=env,
    )  # fmt: skip


def test_a_grpc_target_naming_another_host_is_refused_before_any_call(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    key = SigningKey.generate()
    (tmp_path / "card.jwk").write_text(json.dumps(key.public_jwk()))
    port = free_port()
    with other_host(tmp_path) as (elsewhere, recorder):
        lying = f"dns://127.0.0.1:{port}/{elsewhere}"
        with running(_card_app(f"http://127.0.0.1:{port}", lying, key), port) as base_url:
            done = federation(
                data, tmp_path, "register", base_url, "--name", "rogue",
                "--trust-key", str(tmp_path / "card.jwk"),
            )  # fmt: skip
        assert done.returncode != 0, done.stdout
        assert done.stderr.startswith(f"federation: error: {GRPC_TARGET_INVALID}: "), done.stderr
        assert recorder.calls == []
    assert not data.path("agents.json").exists() or "rogue" not in data.read_json("agents.json")


def _stored(base_url: str, grpc_url: str, key: SigningKey) -> dict[str, Any]:
    """The agent as agents.json would hold it had its card been accepted before the rule."""
    card = risk_card(base_url)
    interface = AgentInterface(
        url=grpc_url, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION
    )
    signed = sign_card(to_wire(card.model_copy(update={"supported_interfaces": [interface]})), key)
    return {
        "name": "rogue",
        "card_url": base_url + "/.well-known/agent-card.json",
        "endpoint": grpc_url,
        "binding": "GRPC",
        "protocol_version": "1.0",
        "card": signed,
        "registered_at": "2026-01-01T00:00:00Z",
        "trust": "pinned_key",
        "pinned_jwks": {"keys": [key.public_jwk()]},
        "verified_kid": key.kid,
    }


def test_a_stored_agent_with_such_a_target_is_sent_nothing(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    key = SigningKey.generate()
    payload = tmp_path / "input.json"
    payload.write_text(json.dumps(PAYLOAD))
    with other_host(tmp_path) as (elsewhere, recorder):
        own = f"http://127.0.0.1:{free_port()}"
        stored = _stored(own, f"dns://{own.removeprefix('http://')}/{elsewhere}", key)
        data.write_json({"rogue": stored}, "agents.json")
        done = federation(
            data, tmp_path, "delegate", "--to", "rogue", "--skill", SKILL, "--input", str(payload)
        )
        assert GRPC_TARGET_INVALID in done.stdout + done.stderr, done.stdout + done.stderr
        assert recorder.calls == []


def test_a_channel_without_calls_drops_its_connection() -> None:
    """A channel holds its connection only while calls use it: after the client's idle
    time it is IDLE (no connection, no reconnecting) until the next call."""

    async def states(address: str) -> tuple[grpc.ChannelConnectivity, ...]:
        async with A2AClient(limits=ClientLimits(idle_channel_seconds=1.0)) as client:
            remote = GrpcTransport(client, Interface(address, GRPC))
            with pytest.raises(FederationError):
                await remote.get_task(GetTaskRequest(id="t"), {})
            used = remote.channel().get_state()
            await asyncio.sleep(2.5)
            return used, remote.channel().get_state()

    with other_host(None) as (address, recorder):
        used, later = asyncio.run(states(address))
        assert [method for method, _ in recorder.calls] == ["/lf.a2a.v1.A2AService/GetTask"]
    assert (used, later) == (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.IDLE)
