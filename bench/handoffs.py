"""Figure (2): governed handoffs per second, and (4) ledger appends while they run.

Run as the load process: ``python -m bench.handoffs coordinator URL --keys DIR`` drives
handoffs through the coordinator (:mod:`bench.governed`) against remote_risk at ``URL``;
``python -m bench.handoffs sdk-client URL`` drives the a2a-sdk client against the a2a-sdk
server, the baseline round trip; ``python -m bench.handoffs floor URL --keys DIR`` the
governed floor (:mod:`bench.floor_governed`) against the member floor at ``URL``.
``concurrency`` workers each start the next handoff as soon as theirs ends; a warm-up,
then ``runs`` windows of ``seconds``. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from agent_cards.keys import load_key_set
from bench import governed, procs
from bench.floor_governed import Connection, GovernedFloor
from bench.tokens import risk_payload
from contracts.handoff import HandoffState
from coordinator import loop as event_loop
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.engine import writer_of

Attempt = Callable[[], Awaitable[bool]]


async def window(
    attempt: Attempt, concurrency: int, seconds: float, server: procs.ServerCPU | None = None
) -> dict[str, Any]:
    done: list[float] = []
    failed: list[int] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            if await attempt():
                done.append(time.perf_counter() - started)
            else:
                failed.append(1)

    server = server or procs.ServerCPU(None)
    started, cpu, own = time.perf_counter(), procs.cpu_times(), time.process_time()
    switched = _switches()
    server.start()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    busy = procs.busy_cores(cpu, procs.cpu_times())
    own = time.process_time() - own
    voluntary, involuntary = (now - then for now, then in zip(_switches(), switched, strict=True))
    done.sort()
    return {
        "count": len(done),
        "seconds": elapsed,
        "rps": len(done) / elapsed,
        "p50_ms": done[len(done) // 2] * 1000 if done else 0.0,
        "errors": len(failed),
        "busy_cores": busy,  # the whole machine's, every process on it
        # this process's CPU (every thread) per completed attempt: the coordinator's
        # per handoff, or the a2a-sdk client's per round trip
        "cpu_ms": own * 1000 / max(1, len(done)),
        # the server's process (remote_risk, or the a2a-sdk server), when its pid is given
        "server_cpu_ms": server.ms_per(len(done)),
        # this process's context switches per completed attempt (every thread): waits
        # that gave the core up, and preemptions; they read a change of hand-overs
        # between threads where CPU windows are too noisy to
        "voluntary_switches": voluntary / max(1, len(done)),
        "involuntary_switches": involuntary / max(1, len(done)),
    }


def _switches() -> tuple[int, int]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw, usage.ru_nivcsw


async def coordinator_load(args: argparse.Namespace) -> dict[str, Any]:
    keys = load_key_set(args.keys)
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-") as root:
        ws = governed.workspace(Path(root), args.database_url)
        async with A2AClient() as client:
            # several URLs (remote_risk replicas): registered each, taken in turn
            agents = [
                await governed.register(client, ws, url, f"remote-risk-{number}")
                for number, url in enumerate(args.url.split(","))
            ]
            ledger = ws.ledger()
            writer = writer_of(ws.engine())
            server = procs.ServerCPU(args.server_pid)
            turns = itertools.cycle(agents)

            async def attempt() -> bool:
                outcome = await governed.handoff(client, next(turns), keys, ws)
                return outcome.record.state is HandoffState.ACCEPTED

            await window(attempt, args.concurrency, args.warmup)
            runs = []
            for _ in range(args.runs):
                before, sizes = ledger.head()[0], Counter(writer.batch_sizes)
                in_place = writer.batches_in_place
                result = await window(attempt, args.concurrency, args.seconds, server)
                appended = ledger.head()[0] - before
                result["ledger_appends_per_s"] = appended / result["seconds"]
                result["events_per_handoff"] = appended / max(1, result["count"])
                result.update(batch_figures(writer.batch_sizes - sizes))
                result["commits_in_place"] = writer.batches_in_place - in_place
                runs.append(result)
        ws.close()
    return {"kind": "coordinator", "concurrency": args.concurrency, "runs": runs}


async def floor_load(args: argparse.Namespace) -> dict[str, Any]:
    """Figure (2f): the governed floor against the member floor at ``args.url``."""
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as root:
        floor = GovernedFloor(args.url, load_key_set(args.keys), Path(root))
        connections = asyncio.Queue[Connection]()
        for _ in range(args.concurrency):
            connections.put_nowait(floor.connection())

        async def attempt() -> bool:
            connection = await connections.get()
            try:
                return await floor.handoff(connection)
            finally:
                connections.put_nowait(connection)

        await window(attempt, args.concurrency, args.warmup)
        server = procs.ServerCPU(args.server_pid)
        runs = [
            await window(attempt, args.concurrency, args.seconds, server) for _ in range(args.runs)
        ]
    return {"kind": "floor", "concurrency": args.concurrency, "runs": runs}


def batch_figures(sizes: Counter[int]) -> dict[str, Any]:
    """Group commit in one window: durable points per commit (mean, largest, histogram)."""
    commits = sum(sizes.values())
    points = sum(size * count for size, count in sizes.items())
    return {
        "points_per_commit": points / commits if commits else 0.0,
        "largest_commit": max(sizes, default=0),
        "commits": {str(size): sizes[size] for size in sorted(sizes)},
    }


async def sdk_client_load(args: argparse.Namespace) -> dict[str, Any]:
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    text = json.dumps(risk_payload())
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    http = httpx.AsyncClient(limits=limits, trust_env=False, timeout=30)
    client = await create_client(
        args.url, client_config=ClientConfig(streaming=False, httpx_client=http)
    )

    async def attempt() -> bool:
        request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
        async for event in client.send_message(request):
            if event.WhichOneof("payload") == "task":
                return bool(event.task.status.state == TaskState.TASK_STATE_COMPLETED)
        return False

    await window(attempt, args.concurrency, args.warmup)
    server = procs.ServerCPU(args.server_pid)
    runs = [await window(attempt, args.concurrency, args.seconds, server) for _ in range(args.runs)]
    await client.close()
    await http.aclose()
    return {"kind": "sdk-client", "concurrency": args.concurrency, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["coordinator", "floor", "sdk-client"])
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", help="coordinator, floor: the issuer's key set directory")
    parser.add_argument("--database-url", help="coordinator: PostgreSQL instead of SQLite")
    parser.add_argument("--server-pid", type=int, help="the server's process: its CPU per request")
    args = parser.parse_args()
    if args.kind == "coordinator":  # on the loop every coordinator entry point runs on
        print(json.dumps(event_loop.run(coordinator_load(args))))
    elif args.kind == "floor":
        print(json.dumps(event_loop.run(floor_load(args))))
    else:
        print(json.dumps(asyncio.run(sdk_client_load(args))))


if __name__ == "__main__":
    main()
