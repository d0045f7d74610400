"""Issue 35: how long from ``federation revoke`` to the remote task cancelled.

On loopback: the coordinator's API (which drives the delegations with its worker and
serves the status lists) and a remote_risk member built on the kit, with a 60 s skill so
that every task is still working when it is revoked, reached through a link that can be
cut. Each round delegates one run through the API, waits until the member holds its task
WORKING, then times the revocation exactly as ``federation revoke RUN`` does it
(:func:`coordinator.service.revoke.revoke`, from the call) until the member's own task
store says TASK_STATE_CANCELED (read every millisecond).

Two modes: ``push`` (the signed push reaches the member) and ``lost`` (the link is cut
for new connections during the revocation, so the push fails and the member learns it
from the status list at its next poll, every ``--poll`` seconds). Goals: p99 <= 1 s with
the push, <= poll + 1 s with it lost. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench import procs
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.authority.revocation import STATUS_URL_ENV
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.http.api import create_api
from coordinator.service.revoke import revoke
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings

TOKEN = "bench-operator-token-0123456789abcdefXYZ"
SKILL = "interpret-risk-policy"
PAYLOAD = {
    "brief": {"id": "brief-001", "uses_real_conversations": False},
    "policy_note": {
        "id": "risk-policy-007",
        "refund_execution_permitted": False,
        "real_conversations_require_privacy_review": True,
    },
}


class Link:
    """A loopback TCP forwarder to one port; ``cut``, it closes new connections."""

    def __init__(self, backend: int, port: int | None = None) -> None:
        self.backend = backend
        self.port = procs.free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        self.cut = False

    async def serve(self) -> asyncio.Server:
        return await asyncio.start_server(self._connection, "127.0.0.1", self.port)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@contextmanager
def served(app: Any, port: int) -> Iterator[None]:
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def forwarding(link: Link) -> Iterator[None]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(link.serve(), loop).result(timeout=10)
    try:
        yield
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


class Federation:
    def __init__(self, root: Path, poll: float) -> None:
        self.data = DataDir(root / "data")
        self.keys = coordinator_keys(self.data)
        self.api_port, member_port = procs.free_port(), procs.free_port()
        os.environ[STATUS_URL_ENV] = f"http://127.0.0.1:{self.api_port}"
        self.link = Link(member_port)
        self.member_port = member_port
        settings = Settings(
            public_base_url=self.link.url,
            skill_delay_seconds=60.0,
            trusted_issuers={DEFAULT_ISSUER: self.keys.trusted_keys()},
            revocation_poll_seconds=poll,
        )
        self.member = create_app(settings)
        self.ws = Workspace(self.data)
        self.api = create_api(self.ws, CoordinatorSettings(operator_token=TOKEN))

    def working_task(self, http: httpx.Client, known: set[str]) -> tuple[str, str]:
        """Delegate one run; its id and the member's task once WORKING."""
        body = {"to": "remote-risk", "skill": SKILL, "input": PAYLOAD, "wait": False}
        answer = http.post("/v1/delegations", json=body)
        answer.raise_for_status()
        run_id = str(answer.json()["run_id"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for task_id, record in list(self.member.state.task_store._records.items()):
                if task_id not in known and record.state.value == "TASK_STATE_WORKING":
                    known.add(task_id)
                    return run_id, task_id
            time.sleep(0.005)
        shown = http.get(f"/v1/runs/{run_id}").text[:2000]
        raise RuntimeError(f"the delegation never reached the member: {shown}")

    def seconds_to_cancel(self, run_id: str, task_id: str, lost: bool) -> float:
        self.link.cut = lost
        started = time.perf_counter()
        revocation = asyncio.run(
            revoke(self.ws, self.keys, issuer_id(), run_id, by="bench", why="bench")
        )
        records = self.member.state.task_store._records
        while records[task_id].state.value != "TASK_STATE_CANCELED":
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"task {task_id} never cancelled: {revocation}")
            time.sleep(0.001)
        elapsed = time.perf_counter() - started
        self.link.cut = False
        outcome = revocation["pushes"][0]["outcome"]
        if outcome != ("failed" if lost else "pushed"):
            raise RuntimeError(f"unexpected push outcome {outcome} (lost={lost})")
        return elapsed


def measure(rounds: int, poll: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        fed = Federation(Path(directory), poll)
        with (
            forwarding(fed.link),
            served(fed.member, fed.member_port),
            served(fed.api, fed.api_port),
        ):
            anchor = TrustAnchor(keys=fed.member.state.signing_keys.trusted_keys())
            asyncio.run(_register(fed.data, fed.link.url, anchor))
            headers = {"Authorization": f"Bearer {TOKEN}"}
            base = f"http://127.0.0.1:{fed.api_port}"
            known: set[str] = set()
            result: dict[str, Any] = {"rounds": rounds, "poll_seconds": poll}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                for mode, lost in (("push", False), ("lost", True)):
                    times = []
                    for _ in range(rounds):
                        run_id, task_id = fed.working_task(http, known)
                        times.append(fed.seconds_to_cancel(run_id, task_id, lost))
                    result[mode] = summary(times)
        fed.ws.close()
    result["push_goal_met"] = result["push"]["p99_s"] <= 1.0
    result["lost_goal_met"] = result["lost"]["p99_s"] <= poll + 1.0
    return result


async def _register(data: DataDir, url: str, anchor: TrustAnchor) -> None:
    async with A2AClient() as client:
        await Registry(data).register(client, url, anchor=anchor)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_s": statistics.median(ordered), "p99_s": p99, "max_s": ordered[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--poll", type=float, default=1.0, help="the member's poll interval")
    args = parser.parse_args()
    print(json.dumps(measure(args.rounds, args.poll)))


if __name__ == "__main__":
    main()
