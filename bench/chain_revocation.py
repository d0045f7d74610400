"""Issue 35: from ``federation revoke`` to the task cancelled at every hop of a chain.

On loopback: the coordinator's API (its worker drives the delegation; it serves the token
exchange and the status lists) and three members built with the kit, each behind a link
that can be cut (:class:`bench.revocation.Link`). The owner delegates to A; A's skill
asks B with a child of its token (token exchange), B's asks C the same way, and C holds
its task WORKING for a minute: owner -> A -> B -> C, three hops, every task WORKING.
Each round then times the revocation of the run exactly as ``federation revoke RUN``
does it (:func:`coordinator.service.revoke.revoke`), from the call until each member's
own task store says TASK_STATE_CANCELED (read every millisecond): the figure is the
last hop's time, with each hop's kept too.

Two modes, as in :mod:`bench.revocation`: ``push`` (the signed pushes reach the three
members) and ``lost`` (the three links are cut for new connections, so every push fails
and each member learns it from the status list at its next poll, every ``--poll``
seconds). Goals: p99 <= 1 s with the push, <= poll + 1 s with it lost. Prints one JSON
line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from agent_cards.documents import with_base_url
from agent_cards.keys import KeySet, SigningKey
from bench import procs
from bench.revocation import Link, forwarding, served, summary
from contracts.grant import Budget
from contracts.wire import AgentCard, TaskState
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.authority.revocation import STATUS_URL_ENV
from coordinator.service.http.api import create_api
from coordinator.service.revoke import revoke
from coordinator.service.settings import CoordinatorSettings
from coordinator.service.token_exchange import EXCHANGE_PATH
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.server.app import create_app
from member_kit.settings import MemberSettings
from member_kit.skill import Member, Outcome
from member_kit.trust.chain import ChainRefused, delegate, half_budget

TOKEN = "bench-operator-token-0123456789abcdefXYZ"
HOPS = ("hop-a", "hop-b", "hop-c")
SKILL = "relay"
HOLD_SECONDS = 60.0
INPUT = {"text": "Refunds are handled by the support team."}
CANCELED = "TASK_STATE_CANCELED"


def scopes_from(index: int) -> list[str]:
    """What the skill of ``HOPS[index]`` asks for: its own scope and those it passes on."""
    return [f"chain:{name.removeprefix('hop-')}" for name in HOPS[index:]]


class Relay:
    """Asks the next hop (if any) with a child of its token, then holds its task WORKING."""

    skill_id = SKILL
    artifact_name = "relay"
    artifact_description = "held"
    input_hint = ""
    immediate = False
    needs_budget = False

    def __init__(self, next_agent: str | None) -> None:
        self.next_agent = next_agent

    def input_problems(self, data: Any) -> list[str]:
        return [] if isinstance(data, dict) else ["must be a JSON object"]

    def run(self, data: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError("the relay runs in the background only")

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        if self.next_agent is not None:
            try:
                await delegate(self.next_agent, SKILL, dict(data), budget=half_budget(budget))
            except ChainRefused as refused:
                return Outcome(TaskState.FAILED, self.failure(refused.reason, str(refused)))
        await asyncio.sleep(HOLD_SECONDS)
        return Outcome(TaskState.COMPLETED, {"held": True})

    def failure(self, code: str, message: str) -> dict[str, Any]:
        return {"status": "failed", "summary": message, "errorCode": code}


def card_of(index: int) -> Any:
    """The card of ``HOPS[index]`` (JSON-RPC, delegation tokens asked for its scopes)."""
    document = {
        "name": HOPS[index],
        "description": "A bench hop: asks the next one, then holds its task.",
        "supportedInterfaces": [
            {"url": "/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ],
        "provider": {"organization": f"Team {index}", "url": "https://bench.example/"},
        "version": "0.1.0",
        "capabilities": {"streaming": True, "pushNotifications": False},
        "securitySchemes": {
            "delegation": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
        },
        "securityRequirements": [{"schemes": {"delegation": {"list": []}}}],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {
                "id": SKILL,
                "name": "Relay",
                "description": "Asks the next hop with a child token, then holds.",
                "tags": ["bench"],
                "securityRequirements": [{"schemes": {"delegation": {"list": scopes_from(index)}}}],
            }
        ],
    }
    card = AgentCard.model_validate(document)
    return lambda base_url: with_base_url(card, base_url)


@dataclass
class Hop:
    name: str
    app: FastAPI
    link: Link
    port: int

    def tasks(self) -> dict[str, Any]:
        records: dict[str, Any] = self.app.state.task_store._records
        return records


class ChainBench:
    def __init__(self, root: Path, poll: float) -> None:
        self.data = DataDir(root / "data")
        self.keys = coordinator_keys(self.data)
        self.ports = [procs.free_port() for _ in range(1 + 2 * len(HOPS))]
        self.api_port = self.ports.pop()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        os.environ[STATUS_URL_ENV] = self.api_url
        self.ws = Workspace(self.data)
        self.api = create_api(self.ws, CoordinatorSettings(operator_token=TOKEN))
        self.hops = [self._hop(index, poll) for index in range(len(HOPS))]

    def _hop(self, index: int, poll: float) -> Hop:
        port = self.ports.pop()
        link = Link(port, self.ports.pop())
        settings = MemberSettings(
            public_base_url=link.url,
            trusted_issuers={DEFAULT_ISSUER: self.keys.trusted_keys()},
            signing_keys=KeySet(active=SigningKey.generate()),
            exchange_url=self.api_url + EXCHANGE_PATH,
            revocation_poll_seconds=poll,
        )
        following = HOPS[index + 1] if index + 1 < len(HOPS) else None
        member = Member(HOPS[index].replace("-", "_"), Relay(following), card_of(index))
        return Hop(HOPS[index], create_app(settings, member), link, port)

    @contextmanager
    def running(self) -> Iterator[httpx.Client]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with ExitStack() as stack:
            for hop in self.hops:
                stack.enter_context(forwarding(hop.link))
                stack.enter_context(served(hop.app, hop.port))
            stack.enter_context(served(self.api, self.api_port))
            http = stack.enter_context(httpx.Client(base_url=self.api_url, headers=headers))
            for hop in self.hops:
                self._register(http, hop)
            yield http

    def _register(self, http: httpx.Client, hop: Hop) -> None:
        body = {
            "url": hop.link.url, "name": hop.name, "trust_on_first_use": True,
            "return_schemas": {SKILL: {"type": "object"}},
        }  # fmt: skip
        http.post("/v1/agents", json=body, timeout=60).raise_for_status()

    def working_chain(self, http: httpx.Client, known: set[str]) -> tuple[str, list[str]]:
        """Delegate one run to A; its id and each hop's task once all three are WORKING."""
        body = {"to": HOPS[0], "skill": SKILL, "input": INPUT, "wait": False}
        answer = http.post("/v1/delegations", json=body, timeout=60)
        answer.raise_for_status()
        run_id = str(answer.json()["run_id"])
        found: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while len(found) < len(self.hops) and time.monotonic() < deadline:
            for hop in self.hops:
                for task_id, record in list(hop.tasks().items()):
                    new = task_id not in known and hop.name not in found
                    if new and record.state.value == "TASK_STATE_WORKING":
                        known.add(task_id)
                        found[hop.name] = task_id
            time.sleep(0.005)
        if len(found) < len(self.hops):
            shown = http.get(f"/v1/runs/{run_id}").text[:2000]
            raise RuntimeError(f"the chain never reached every hop ({found}): {shown}")
        return run_id, [found[hop.name] for hop in self.hops]

    def seconds_to_cancel(self, run_id: str, tasks: list[str], lost: bool) -> list[float]:
        """Seconds from the revocation's call to each hop's task CANCELED."""
        for hop in self.hops:
            hop.link.cut = lost
        started = time.perf_counter()
        revocation = asyncio.run(
            revoke(self.ws, self.keys, issuer_id(), run_id, by="bench", why="bench")
        )
        done: dict[int, float] = {}
        while len(done) < len(self.hops):
            for index, (hop, task_id) in enumerate(zip(self.hops, tasks, strict=True)):
                if index not in done and hop.tasks()[task_id].state.value == CANCELED:
                    done[index] = time.perf_counter() - started
            if time.perf_counter() - started > 120:
                raise RuntimeError(f"not every hop cancelled ({done}): {revocation}")
            time.sleep(0.001)
        for hop in self.hops:
            hop.link.cut = False
        _check_pushes(revocation, lost)
        return [done[index] for index in range(len(self.hops))]


def _check_pushes(revocation: Mapping[str, Any], lost: bool) -> None:
    outcomes = {push["agent"]: push["outcome"] for push in revocation["pushes"]}
    expected = {name: "failed" if lost else "pushed" for name in HOPS}
    if outcomes != expected:
        raise RuntimeError(f"unexpected pushes {outcomes} (lost={lost})")


def measure(rounds: int, poll: float) -> dict[str, Any]:
    result: dict[str, Any] = {"rounds": rounds, "poll_seconds": poll, "hops": len(HOPS)}
    with tempfile.TemporaryDirectory() as directory:
        bench = ChainBench(Path(directory), poll)
        with bench.running() as http:
            known: set[str] = set()
            for mode, lost in (("push", False), ("lost", True)):
                per_hop: list[list[float]] = [[] for _ in HOPS]
                for _ in range(rounds):
                    run_id, tasks = bench.working_chain(http, known)
                    for index, seconds in enumerate(bench.seconds_to_cancel(run_id, tasks, lost)):
                        per_hop[index].append(seconds)
                every = [max(times) for times in zip(*per_hop, strict=True)]
                result[mode] = {
                    "every_hop": summary(every),
                    **{name: summary(times) for name, times in zip(HOPS, per_hop, strict=True)},
                }
        bench.ws.close()
    result["push_goal_met"] = result["push"]["every_hop"]["p99_s"] <= 1.0
    result["lost_goal_met"] = result["lost"]["every_hop"]["p99_s"] <= poll + 1.0
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--poll", type=float, default=1.0, help="each member's poll interval")
    args = parser.parse_args()
    print(json.dumps(measure(args.rounds, args.poll)))


if __name__ == "__main__":
    main()
