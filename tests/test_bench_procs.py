"""The bench starts its servers on ports the kernel chose and holds, and waits until each
listens.

A port chosen that way lies in the range outgoing connections take their own ports from,
so a probe of it while nothing listens yet can be given that very port and connect to
itself (TCP's simultaneous open). The bench once took such a connection for its server:
the tests that drove that server then talked to themselves ("illegal request line") or to
nothing at all. Here a real self-connected socket stands in for the kernel's choice.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench import procs


def self_connected() -> socket.socket:
    """A loopback socket connected to itself: bound to a port, then connected to it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((procs.HOST, 0))
    sock.connect(sock.getsockname())
    assert sock.getsockname() == sock.getpeername()
    return sock


@pytest.fixture
def idle_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    procs.stop(process)


def test_a_probe_connected_to_itself_is_not_a_server(
    monkeypatch: pytest.MonkeyPatch, idle_process: subprocess.Popen[bytes]
) -> None:
    port = procs.free_port()
    monkeypatch.setattr(socket, "create_connection", lambda *_, **__: self_connected())
    assert not procs.accepts(port)
    with pytest.raises(RuntimeError, match="did not start"):
        procs.wait_for_port(port, idle_process, timeout=0.3)


def test_a_listening_server_is_one() -> None:
    with socket.create_server((procs.HOST, 0)) as listener:
        assert procs.accepts(listener.getsockname()[1])


def test_a_chosen_port_is_held_until_its_server_listens() -> None:
    """Between being chosen and the server's bind the port is nobody else's: a plain bind
    (another process's, or an outgoing connection's) is refused it, a connection to it
    is refused as on a closed port, and a server binding it as ours do gets it. (Whether
    a released port is anyone's again is not asked: another worker may take it at once.)"""
    before = procs.held_count()
    port = procs.free_port()
    try:
        with socket.socket() as other, pytest.raises(OSError):
            other.bind((procs.HOST, port))
        assert not procs.accepts(port)
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((procs.HOST, port))
            server.listen()
            assert procs.accepts(port)
    finally:
        procs.release_ports(before)
    assert procs.held_count() == before
