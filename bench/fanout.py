"""Figure (6): four specialists that each take 200 ms, consulted in parallel.

Run as the load process: ``python -m bench.fanout URL URL URL URL --keys DIR``. Each URL
is a remote_risk whose skill holds every task for 200 ms. One consultation is one
governed handoff in a run of its own; the fan-out is one run making four handoffs at
once (``asyncio.gather``), as the pilot consults its specialists. Both are timed
``runs`` times after a warm-up. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from agent_cards.keys import KeySet, load_key_set
from bench import governed
from contracts.handoff import HandoffState
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.wire.client import A2AClient
from coordinator.workspace import Workspace


async def consult(
    client: A2AClient, agents: list[RegisteredAgent], keys: KeySet, ws: Workspace
) -> float:
    run = governed.new_run(agents[0], ws)
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(governed.handoff(client, agent, keys, ws, run=run, save=False) for agent in agents)
    )
    elapsed = time.perf_counter() - started
    states = [outcome.record.state for outcome in outcomes]
    if any(state is not HandoffState.ACCEPTED for state in states):
        raise RuntimeError(f"a consultation did not succeed: {states}")
    return elapsed


async def measure(urls: list[str], keys_dir: str, runs: int) -> dict[str, list[float]]:
    keys = load_key_set(keys_dir)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as root:
        ws = governed.workspace(Path(root))
        async with A2AClient() as client:
            agents = [
                await governed.register(client, ws, url, f"risk-{index}")
                for index, url in enumerate(urls)
            ]
            await consult(client, agents, keys, ws)
            await consult(client, agents[:1], keys, ws)
            one, four = [], []
            for _ in range(runs):
                one.append(await consult(client, agents[:1], keys, ws))
                four.append(await consult(client, agents, keys, ws))
        ws.close()
    return {"one_s": one, "four_s": four}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs=4)
    parser.add_argument("--keys", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.urls, args.keys, args.runs))))


if __name__ == "__main__":
    main()
