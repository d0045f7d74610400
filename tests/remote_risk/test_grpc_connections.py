"""The gRPC port is held to the HTTP edge's connection limits.

One client opened 300 TCP connections to remote_risk's gRPC port and sent nothing: all
of them stayed open for 120 seconds (gRPC's default handshake timeout, no connection
cap). Against a real remote_risk process with small limits, the connections past
``max_connections_per_client`` are closed at once, the rest once
``header_timeout_seconds`` passes without a handshake, and a channel left idle after a
call is sent away after ``keep_alive_seconds``.

Later, one address opened 1,100 silent connections, held all 1,024 slots, and a
legitimate call from another address got UNAVAILABLE: the per-client cap bounded calls
in flight, not connections. Here one address (127.0.0.2) opens more connections than
the whole port allows, and a call from another (127.0.0.1) is still served.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest

from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc
from agent_cards.edge.grpc_limits import peer_host, server_options
from agent_cards.edge.limits import EdgeLimits
from member_kit.server.grpc_binding import GRPCServer
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.servers import free_port

MAX_CONNECTIONS = 64
PER_CLIENT = 16
HOG = "127.0.0.2"  # another client address on loopback
TIMEOUT_SECONDS = 2
CLIENT_CONNECTIONS = 300
READY = 2  # grpc_connectivity_state


@pytest.fixture(scope="module")
def grpc_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("REMOTE_RISK_")}
    env = {
        **inherited,
        "REMOTE_RISK_DATA_DIR": str(tmp_path_factory.mktemp("risk")),
        "REMOTE_RISK_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "REMOTE_RISK_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
        "REMOTE_RISK_HEADER_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
        "REMOTE_RISK_KEEP_ALIVE_SECONDS": str(TIMEOUT_SECONDS),
    }
    argv = ["--insecure-anonymous", "--port", "0", "--grpc-port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_risk", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("remote_risk listening on ")
        _wait_listening(port)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=20)


def _wait_listening(port: int) -> None:
    """The gRPC port starts with the app, just after the HTTP one."""
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(0.2)  # that probe's own slot is given back
            return
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the gRPC port never listened"
            time.sleep(0.1)


def _closed_by_server(sock: socket.socket) -> bool:
    """The server closed it (whatever it wrote first: a refusal's GOAWAY, say)."""
    while select.select([sock], [], [], 0)[0]:
        try:
            if sock.recv(65536) == b"":
                return True
        except ConnectionResetError:
            return True
    return False


def _still_open(socks: list[socket.socket], open_now: set[int]) -> set[int]:
    return {index for index in open_now if not _closed_by_server(socks[index])}


def test_idle_connections_from_one_client_are_refused_and_closed(grpc_port: int) -> None:
    socks = [
        socket.create_connection(("127.0.0.1", grpc_port), timeout=5)
        for _ in range(CLIENT_CONNECTIONS)
    ]
    try:
        time.sleep(0.5)
        open_now = _still_open(socks, set(range(CLIENT_CONNECTIONS)))
        assert len(open_now) <= PER_CLIENT, len(open_now)
        deadline = time.monotonic() + TIMEOUT_SECONDS + 5
        while open_now and time.monotonic() < deadline:
            time.sleep(0.2)
            open_now = _still_open(socks, open_now)
        assert open_now == set(), f"{len(open_now)} idle connections still open"
    finally:
        for sock in socks:
            sock.close()


def _silent_connections(port: int, count: int, source: str) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        socks.append(sock)
    return socks


def test_one_address_cannot_hold_the_port_against_another(grpc_port: int) -> None:
    """More silent connections from one address than the port takes in all: those past
    its per-client cap are closed at once, and a call from another address is answered
    (NOT_FOUND: served, not UNAVAILABLE) while the rest are still open."""
    hog = _silent_connections(grpc_port, MAX_CONNECTIONS + 16, HOG)
    try:
        time.sleep(0.3)
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            with pytest.raises(grpc.RpcError) as answered:
                stub.GetTask(
                    a2a_pb2.GetTaskRequest(id="no-such-task"),
                    metadata=[("a2a-version", "1.0")],
                    timeout=1.5,
                )
        assert answered.value.code() == grpc.StatusCode.NOT_FOUND, answered.value
        # a refused connection is told why: an HTTP/2 GOAWAY naming the reason
        assert b"too_many_client_connections" in hog[-1].recv(65536)
        open_now = _still_open(hog, set(range(len(hog))))
        assert 0 < len(open_now) <= PER_CLIENT, len(open_now)
    finally:
        for sock in hog:
            sock.close()


def test_a_channel_left_idle_is_sent_away(grpc_port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.RpcError):
            stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), timeout=10)
        assert channel._channel.check_connectivity_state(False) == READY
        started = time.monotonic()
        while channel._channel.check_connectivity_state(False) == READY:
            assert time.monotonic() - started < 20, "the idle channel is still connected"
            time.sleep(0.2)
        assert time.monotonic() - started >= TIMEOUT_SECONDS - 0.5


def test_the_options_follow_the_edge_limits() -> None:
    limits = EdgeLimits(max_connections=10, max_connections_per_client=5, keep_alive_seconds=3)
    options = dict(server_options(limits))
    assert options["grpc.max_allowed_incoming_connections"] == 10
    assert options["grpc.max_concurrent_streams"] == 5
    assert options["grpc.max_connection_idle_ms"] == 3000
    assert options["grpc.server_handshake_timeout_ms"] == 10_000
    assert peer_host("ipv4:127.0.0.1:5000") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:5000") == "::1"


def test_a_call_that_bypassed_the_front_door_stands_for_no_client() -> None:
    """A local process dialling the gRPC server's private port directly (not through the
    front door, so admitted by no per-client count) has each call refused."""
    app = create_app(Settings(public_base_url="http://127.0.0.1:1"))
    (route,) = [r for r in app.routes if getattr(r, "name", "") == "a2a_jsonrpc"]
    dispatcher = route.endpoint.__self__.dispatcher  # type: ignore[attr-defined]

    async def bypass() -> grpc.StatusCode:
        server = GRPCServer(dispatcher, None, f"127.0.0.1:{free_port()}")
        await server.start()
        try:
            backend = server._front._backend  # type: ignore[union-attr]
            async with grpc.aio.insecure_channel(f"{backend[0]}:{backend[1]}") as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.GetTask(a2a_pb2.GetTaskRequest(id="x"), timeout=5)
                assert "connection_not_admitted" in (refused.value.details() or "")
                return refused.value.code()
        finally:
            await server.stop()

    assert asyncio.run(bypass()) == grpc.StatusCode.RESOURCE_EXHAUSTED
