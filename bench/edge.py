"""The HTTP edge measured: stock uvicorn (httptools, h11) against the bounded protocol.

``python -m bench.edge`` starts one server process per protocol (a trivial Starlette
app, pinned to core 0), and from this process (loopback only, bounded in bytes and time)
measures:

* **throughput**: GET requests per second over ``EDGE_CONNECTIONS`` (8) keep-alive
  connections for ``EDGE_SECONDS`` (3) s;
* **huge header**: a header of up to ``EDGE_HEADER_MB`` (32) MB sent as fast as the server
  takes it: the seconds until it answers or closes, the answer, and the server's RSS
  growth;
* **slowloris**: ``EDGE_SLOW`` (2000) half-open requests from 127.0.0.2, then how long a
  GET from 127.0.0.1 takes, and how many of the half-open connections are still open
  after ``EDGE_SLOW_WAIT`` (12) s.

It prints a Markdown table (the figures quoted in the README's "Limits" section).
``python -m bench.edge serve PROTOCOL PORT`` is the server it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import threading
import time
from typing import Any

from bench import procs

PROTOCOLS = ("httptools", "h11", "bounded")
HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def serve(protocol: str, port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from agent_cards.edge.limits import EdgeLimits
    from agent_cards.edge.protocol import uvicorn_options

    async def hello(request: Any) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/", hello)])
    options: dict[str, Any] = {"http": protocol}
    if protocol == "bounded":
        options = uvicorn_options(EdgeLimits.from_env("EDGE_", os.environ))
    uvicorn.run(app, host=procs.HOST, port=port, log_level="error", access_log=False, **options)


# --- throughput --------------------------------------------------------------------------------


async def _client(port: int, until: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection(procs.HOST, port)
    try:
        while time.monotonic() < until:
            writer.write(HEAD)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            counts.append(1)
    finally:
        writer.close()


def throughput(port: int, connections: int, seconds: float) -> float:
    counts: list[int] = []

    async def run() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(*(_client(port, until, counts) for _ in range(connections)))

    asyncio.run(run())
    return len(counts) / seconds


# --- huge header -------------------------------------------------------------------------------


def huge_header(port: int, pid: int, megabytes: int) -> dict[str, Any]:
    before = procs.rss_bytes(pid)
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], procs.rss_bytes(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    answer = b""
    with socket.create_connection((procs.HOST, port), timeout=60) as sock:
        filler = b"a" * 65536
        with contextlib.suppress(OSError):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
            for _ in range(megabytes * 16):
                sock.sendall(filler)
            sock.sendall(b"\r\n\r\n")
        with contextlib.suppress(OSError):
            answer = sock.recv(200)
    elapsed = time.monotonic() - started
    stop.set()
    sampler.join()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"
    return {"seconds": elapsed, "status": status, "rss_mb": (peak[0] - before) / 2**20}


# --- slowloris ---------------------------------------------------------------------------------


def slowloris(port: int, count: int, wait: float) -> dict[str, Any]:
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.settimeout(5)
            sock.bind(("127.0.0.2", 0))
            try:
                sock.connect((procs.HOST, port))
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                sock.close()
                continue
            held.append(sock)
        started = time.monotonic()
        try:
            with socket.create_connection((procs.HOST, port), timeout=30) as sock:
                sock.sendall(HEAD)
                ok = sock.recv(100).startswith(b"HTTP/1.1 200")
        except OSError:
            ok = False
        latency = time.monotonic() - started
        time.sleep(wait)
        still_open = sum(1 for sock in held if _open(sock))
        return {"get_seconds": latency, "get_ok": ok, "opened": len(held), "open_after": still_open}
    finally:
        for sock in held:
            sock.close()


def _open(sock: socket.socket) -> bool:
    """Whether the server still holds ``sock`` open (an answer followed by EOF is closed)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


# --- the table -----------------------------------------------------------------------------------


def measure(protocol: str) -> dict[str, Any]:
    port = procs.free_port()
    command = procs.python("bench.edge", "serve", protocol, str(port))
    env = {"EDGE_MAX_CONNECTIONS": "4096", "EDGE_MAX_CONNECTIONS_PER_CLIENT": "128"}
    with procs.server(command, port, env=env) as process:
        rate = throughput(
            port,
            int(os.environ.get("EDGE_CONNECTIONS", "8")),
            float(os.environ.get("EDGE_SECONDS", "3")),
        )
        header = huge_header(port, process.pid, int(os.environ.get("EDGE_HEADER_MB", "32")))
        loris = slowloris(
            port,
            int(os.environ.get("EDGE_SLOW", "2000")),
            float(os.environ.get("EDGE_SLOW_WAIT", "12")),
        )
    return {"protocol": protocol, "rps": rate, "header": header, "slowloris": loris}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| protocol | GET/s (8 conns) | huge header: s, answer, server RSS growth | "
        "slowloris: GET from another client | half-open left after wait |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        header, loris = row["header"], row["slowloris"]
        lines.append(
            f"| {row['protocol']} | {row['rps']:.0f} | {header['seconds']:.2f} s, "
            f"{header['status']}, {header['rss_mb']:.0f} MB | "
            f"{loris['get_seconds']:.3f} s ({'ok' if loris['get_ok'] else 'failed'}) | "
            f"{loris['open_after']} of {loris['opened']} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        serve(argv[1], int(argv[2]))
        return
    only = os.environ.get("EDGE_ONLY")
    rows = [measure(protocol) for protocol in PROTOCOLS if not only or protocol in only.split(",")]
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
