"""Figure (5): memory retained per finished task (remote_risk) and handoff (coordinator).

Measured with ``tracemalloc`` in the process that keeps the memory: warm up, collect
garbage, note the traced size, finish ``count`` more tasks or handoffs, collect again;
the growth divided by the count is what each one left behind. Two batches are measured
so that a bound shows: remote_risk's second batch goes past its task capacity (1,000),
where the oldest finished tasks are evicted. ``tracemalloc`` sees Python's heap only
(not SQLite's page cache, nor protobuf's C arenas in the a2a-sdk), so the figure is the growth
of the resident set, measured without ``tracemalloc`` (whose bookkeeping would inflate
it); ``--heap`` gives the traced Python heap instead.

* ``risk``: remote_risk in this process (``create_app`` with the durable store ``serve``
  uses) on an in-memory ASGI transport, one fresh token per SendMessage;
* ``sdk``: the a2a-sdk 1.3.0 server the same way (in-memory store, keeps every task);
* ``coordinator``: governed handoffs from this process to remote_risk at ``URL``.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey, load_key_set
from bench import governed
from bench.baselines import sdk_app
from bench.loadgen import COMPLETED, send_message_body
from bench.procs import rss_bytes
from bench.tokens import TokenMinter
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.remote.wire.client import A2AClient
from remote_risk.service import create_app
from remote_risk.settings import JSONRPC_PATH, Settings

BASE_URL = "http://127.0.0.1:8000"
Step = Callable[[], Awaitable[None]]
# tracemalloc's own bookkeeping grows the resident set, so RSS is measured without it.
HEAP = False


def traced() -> tuple[int, int]:
    """(traced Python heap, resident set size) after a full collection."""
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    return heap, rss_bytes(os.getpid())


async def batches(step: Step, sizes: list[int], concurrency: int) -> list[tuple[int, int]]:
    """Traced heap before and after each batch of ``sizes`` steps."""

    async def run(count: int) -> None:
        queue = iter(range(count))

        async def worker() -> None:
            for _ in queue:
                await step()

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    await run(50)
    if HEAP:
        tracemalloc.start()
    marks = [traced()]
    for size in sizes:
        await run(size)
        marks.append(traced())
    tracemalloc.stop()
    return marks


async def in_memory_server(
    app: Any, minter: TokenMinter | None, sizes: list[int]
) -> list[tuple[int, int]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:

        async def step() -> None:
            headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
            if minter is not None:
                handoff_id, token, _ = minter.take()
                headers["Authorization"] = f"Bearer {token}"
            else:
                handoff_id = "h"
            response = await http.post(
                JSONRPC_PATH, content=send_message_body(handoff_id), headers=headers
            )
            if response.status_code != 200 or COMPLETED not in response.content:
                raise RuntimeError(f"request failed: {response.text[:300]}")

        return await batches(step, sizes, 8)


async def risk(args: argparse.Namespace) -> list[tuple[int, int]]:
    card_keys = KeySet(active=SigningKey.generate())
    minter, keys = TokenMinter.generated(identity_of(card_keys.signing_key().verification_key()))
    with tempfile.TemporaryDirectory(prefix="bench-risk-") as root:
        settings = Settings(
            public_base_url=BASE_URL,
            trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
            data_dir=Path(root),
            signing_keys=card_keys,
        )
        app = create_app(settings)
        minter.fill(sum(args.sizes) + 60)
        try:
            return await in_memory_server(app, minter, args.sizes)
        finally:
            app.state.durable_store.close()


async def sdk(args: argparse.Namespace) -> list[tuple[int, int]]:
    return await in_memory_server(sdk_app(BASE_URL), None, args.sizes)


async def coordinator(args: argparse.Namespace) -> list[tuple[int, int]]:
    keys = load_key_set(args.keys)
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-") as root:
        ws = governed.workspace(Path(root))
        async with A2AClient() as client:
            agent = await governed.register(client, ws, args.url, "remote-risk")

            async def step() -> None:
                outcome = await governed.handoff(client, agent, keys, ws)
                if not outcome.record.terminal:
                    raise RuntimeError(f"handoff not finished: {outcome.record.state}")

            marks = await batches(step, args.sizes, 8)
        ws.close()
        return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["risk", "sdk", "coordinator"])
    parser.add_argument("--url", help="coordinator: the remote_risk to hand off to")
    parser.add_argument("--keys", help="coordinator: the issuer's key set directory")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1500])
    parser.add_argument("--heap", action="store_true", help="trace the Python heap (not RSS)")
    args = parser.parse_args()
    global HEAP
    HEAP = args.heap
    measure = {"risk": risk, "sdk": sdk, "coordinator": coordinator}[args.kind]
    marks = asyncio.run(measure(args))
    steps = list(zip(marks, marks[1:], args.sizes, strict=False))
    heap = [(after[0] - before[0]) / size for before, after, size in steps]
    rss = [(after[1] - before[1]) / size for before, after, size in steps]
    print(json.dumps({"kind": args.kind, "sizes": args.sizes, "heap": heap, "rss": rss}))


if __name__ == "__main__":
    main()
