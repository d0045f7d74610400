"""A closed-loop HTTP load generator: ``python -m bench.loadgen KIND URL [options]``.

``concurrency`` workers each keep one HTTP/1.1 keep-alive connection (so the pool is
bounded by the concurrency) and send SendMessage requests back to back; each request's
latency is timed from the first byte written to the last byte read. A warm-up, then
``runs`` measured windows of ``seconds`` each. The client is a few lines over asyncio
streams rather than httpx so that on its one core it is never the bottleneck.

Kinds: ``risk`` (remote_risk: a fresh delegation token bound to a fresh handoff per
request, minted before each window), ``floor`` (:mod:`bench.floor`, the same tokens),
``sdk`` (the a2a-sdk server), ``fastapi`` and
``fastapi-jwt`` (the bare ceilings, the latter with a token per request). A response
counts only if it is HTTP 200 and holds a completed task. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bench import procs
from bench.tokens import TokenMinter, risk_payload

RPC_PATH = "/a2a/jsonrpc"
COMPLETED = b"TASK_STATE_COMPLETED"
_ids = itertools.count(1)


def send_message_body(
    handoff_id: str, skill: str = "interpret-risk-policy", data: Any = None
) -> bytes:
    """A SendMessage of ``skill`` (the risk skill's brief unless ``data`` is given)."""
    request_id = next(_ids)
    message = {
        "messageId": f"m-{request_id}",
        "role": "ROLE_USER",
        "parts": [
            {"data": risk_payload() if data is None else data, "mediaType": "application/json"}
        ],
        "metadata": {
            "handoffId": handoff_id,
            "attempt": 1,
            "skillId": skill,
            "idempotencyKey": f"bench:{handoff_id}",
        },
    }
    document = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "SendMessage",
        "params": {"message": message},
    }
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass
class Window:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    inline_mints: int = 0
    server_cpu_ms: float | None = None


class Target:
    """Builds the next request for one kind of server."""

    def __init__(
        self, kind: str, url: str, minter: TokenMinter | None, server_pid: int | None = None
    ) -> None:
        self.server_cpu = procs.ServerCPU(server_pid)
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.kind = kind
        self.minter = minter
        self._handoffs = itertools.count(1)
        self._run = f"{time.time_ns():x}"

    def next_request(self, window: Window) -> bytes:
        auth = ""
        if self.minter is not None:
            handoff_id, token, inline = self.minter.take()
            window.inline_mints += inline
            auth = f"Authorization: Bearer {token}\r\n"
        else:
            handoff_id = f"h-{self._run}-{next(self._handoffs)}"
        body = send_message_body(handoff_id)
        head = (
            f"POST {RPC_PATH} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nA2A-Version: 1.0\r\n{auth}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def worker(target: Target, window: Window, until: Callable[[], bool]) -> None:
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        while not until():
            request = target.next_request(window)
            started = time.perf_counter()
            status, body = await exchange(reader, writer, request)
            elapsed = time.perf_counter() - started
            if status == 200 and COMPLETED in body:
                window.latencies.append(elapsed)
            else:
                window.errors += 1
                window.first_error = window.first_error or f"{status}: {body[:300]!r}"
    finally:
        writer.close()


async def measure(target: Target, concurrency: int, seconds: float) -> tuple[Window, float]:
    window = Window()
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    target.server_cpu.start()
    await asyncio.gather(
        *(
            worker(target, window, lambda: time.perf_counter() >= deadline)
            for _ in range(concurrency)
        )
    )
    window.server_cpu_ms = target.server_cpu.ms_per(len(window.latencies))
    return window, time.perf_counter() - started


def summary(window: Window, elapsed: float) -> dict[str, Any]:
    latencies = sorted(window.latencies)
    count = len(latencies)
    p99 = latencies[min(count - 1, int(count * 0.99))] if count else 0.0
    return {
        "count": count,
        "seconds": elapsed,
        "rps": count / elapsed,
        "p50_ms": statistics.median(latencies) * 1000 if count else 0.0,
        "p99_ms": p99 * 1000,
        "errors": window.errors,
        "first_error": window.first_error,
        "inline_mints": window.inline_mints,
        # the server process's CPU (every thread) per completed request, when its pid is known
        "server_cpu_ms": window.server_cpu_ms,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    minter = None
    if args.kind in ("risk", "floor", "fastapi-jwt"):
        minter = TokenMinter.from_directory(args.keys, args.audience)
    target = Target(args.kind, args.url, minter, args.server_pid)
    expected = 200.0
    if minter:
        minter.fill(int(args.warmup * expected * 2) + 2 * args.concurrency)
    window, elapsed = await measure(target, args.concurrency, args.warmup)
    expected = max(expected, len(window.latencies) / elapsed)
    runs = []
    for _ in range(args.runs):
        if minter:
            minter.fill(int(expected * args.seconds * 1.5) + 2 * args.concurrency)
        window, elapsed = await measure(target, args.concurrency, args.seconds)
        runs.append(summary(window, elapsed))
        expected = max(expected, runs[-1]["rps"])
    return {"kind": args.kind, "concurrency": args.concurrency, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "kind", choices=["risk", "floor", "sdk", "sdk-db", "fastapi", "fastapi-jwt"]
    )
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--keys", help="directory of the issuer's key set (risk, floor, fastapi-jwt)"
    )
    parser.add_argument("--audience", help="the aud of the tokens (risk, floor, fastapi-jwt)")
    parser.add_argument("--server-pid", type=int, help="the server's process: its CPU per request")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
