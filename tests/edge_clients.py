"""Raw HTTP/1.1 clients for the edge tests: what a slow, huge or greedy caller does.

Every socket here goes to a loopback address; each loop is bounded in bytes and time.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit


def address(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    assert parts.hostname in ("127.0.0.1", "localhost") and parts.port
    return "127.0.0.1", parts.port


def rss_bytes() -> int:
    """This process's resident set size (the servers under test run in it)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@contextmanager
def connection(
    base_url: str, source: str = "127.0.0.1", timeout: float = 10
) -> Iterator[socket.socket]:
    """A TCP connection to the server from the loopback address ``source``."""
    sock = socket.create_connection(address(base_url), timeout=timeout, source_address=(source, 0))
    try:
        yield sock
    finally:
        sock.close()


def read_response(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the server sends until it closes (or ``limit`` bytes)."""
    received = b""
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        while len(received) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
            if b"\r\n\r\n" in received and _complete(received):
                break
    return received


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def status_of(response: bytes) -> int:
    assert response.startswith(b"HTTP/1.1 "), response[:80]
    return int(response.split(b" ", 2)[1])


def send_until_refused(sock: socket.socket, first: bytes, filler: bytes, total: int) -> int:
    """Send ``first`` then ``filler`` repeatedly, up to ``total`` bytes or until the server
    stops taking them; the bytes sent."""
    sent = 0
    deadline = time.monotonic() + 20
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
        sock.sendall(first)
        sent += len(first)
        while sent < total and time.monotonic() < deadline:
            sock.sendall(filler)
            sent += len(filler)
    return sent


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
