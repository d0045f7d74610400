"""Figure (10): the CPU a governed member adds per request to a stock a2a-sdk agent.

One run starts, each pinned to the server core: the stock agent of
``examples/sdk_member.py`` as the SDK's quickstart serves it (``--stock``: no token, no
receipt, no log), the same agent made a member with the kit in-process (the example's
glue), and the guard sidecar (``federation serve guard``) in front of that same stock
agent process. Each is sent the same sequence of SendMessage requests on one keep-alive
connection, one at a time: with a fresh delegation token per request (minted before the
window) to the kit member and the guard, without one to the bare agent. What is measured
is the CPU time (user + system, ``/proc/PID/stat``) the server process(es) spent over
the window, divided by the requests: the guard's figure is the guard's CPU plus the
agent's. Windows alternate between the three, ``rounds`` times, after a warm-up that
fills the kit's key cache; the median round is used. ``python -m bench.member_overhead``
prints one JSON line (``runs``: CPU ms per request of each window, by server;
``--markdown``: the figures' table instead); ``python -m bench`` runs it as figure 10.

``--against DIR`` also starts the kit member of another checkout of the project (its
``examples/sdk_member.py`` on its own packages; e.g. the main branch beside a change to
the kit) as ``kit_against``, in the same windows: a before-and-after comparison that the
machine's load at the time shifts alike.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from agent_cards.identity import identity_of
from bench import procs
from bench.loadgen import send_message_body
from bench.services import Issuer
from bench.stats import Figure, Spread, figure, machine, markdown
from bench.tokens import delegation_claims
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.tokens import mint_token
from member_kit.trust.issuers import signing_keys

EXAMPLE = procs.REPO / "examples" / "sdk_member.py"
SKILL, SCOPE = "shout", "text:shout"
RPC = "/a2a/jsonrpc"
TEXT = {"text": "the quick brown fox"}
GOAL_MS = "<= 0.3"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Target:
    """A server under load: its URL, the processes whose CPU counts, and the audience of
    its tokens (None: no token is sent)."""

    url: str
    pids: tuple[int, ...]
    audience: str | None


def _requests(target: Target, issuer: Issuer, count: int) -> list[tuple[bytes, dict[str, str]]]:
    """``count`` sends, each for a handoff of its own, with its token when governed."""
    prepared = []
    for _ in range(count):
        handoff_id = f"h-{next(_ids)}"
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        if target.audience is not None:
            claims = {**delegation_claims(target.audience, handoff_id), "scope": SCOPE}
            headers["Authorization"] = "Bearer " + mint_token(claims, issuer.keys.active)
        prepared.append((send_message_body(handoff_id, SKILL, TEXT), headers))
    return prepared


def window(client: httpx.Client, target: Target, issuer: Issuer, count: int) -> float:
    """CPU milliseconds per request the target's processes spent on ``count`` sends."""
    return cpu_per_send(client, target, _requests(target, issuer, count))


def cpu_per_send(
    client: httpx.Client, target: Target, prepared: Sequence[tuple[bytes, dict[str, str]]]
) -> float:
    """CPU milliseconds per request the target's processes spent on the ``prepared`` sends
    (each must complete its task)."""
    before = procs.cpu_seconds(target.pids)
    for body, headers in prepared:
        answer = client.post(target.url + RPC, content=body, headers=headers)
        if answer.status_code != 200 or b"TASK_STATE_COMPLETED" not in answer.content:
            raise RuntimeError(f"{target.url}: {answer.status_code} {answer.text[:300]}")
    return (procs.cpu_seconds(target.pids) - before) * 1000 / len(prepared)


@contextmanager
def started(root: Path, issuer: Issuer, against: Path | None = None) -> Iterator[dict[str, Target]]:
    """The bare agent, the kit member and the guard in front of the bare agent (and the
    kit member of the checkout ``against``)."""
    with ExitStack() as stack:
        agent_port, kit_port, guard_port = (procs.free_port() for _ in range(3))
        agent = stack.enter_context(
            procs.server(
                [*_example(), "--stock", str(agent_port)], agent_port, log=root / "agent.log"
            )
        )
        trust = ["--trust-issuer", f"{DEFAULT_ISSUER}={issuer.jwks_file}"]
        kit_dir, guard_dir = root / "kit-data", root / "guard-data"
        kit = stack.enter_context(
            procs.server(
                [*_example(), "--port", str(kit_port), "--data-dir", str(kit_dir), *trust],
                kit_port,
                log=root / "kit.log",
            )
        )
        guard_args = procs.python(
            "coordinator",
            "serve",
            "guard",
            "--upstream",
            f"http://{procs.HOST}:{agent_port}",
            "--skill-scope",
            f"{SKILL}={SCOPE}",
            "--port",
            str(guard_port),
            "--data-dir",
            str(guard_dir),
            *trust,
        )
        guard = stack.enter_context(procs.server(guard_args, guard_port, log=root / "guard.log"))
        targets = {
            "agent": Target(_url(agent_port), (agent.pid,), None),
            "kit": Target(_url(kit_port), (kit.pid,), _audience(kit_dir)),
            "guard": Target(_url(guard_port), (guard.pid, agent.pid), _audience(guard_dir)),
        }
        if against is not None:
            targets["kit_against"] = stack.enter_context(_kit_of(against, root, trust))
        yield targets


@contextmanager
def _kit_of(checkout: Path, root: Path, trust: list[str]) -> Iterator[Target]:
    """The kit member of another checkout of the project, run on that checkout's code."""
    port, data_dir = procs.free_port(), root / "kit-against-data"
    example = checkout.resolve() / "examples" / "sdk_member.py"
    command = [sys.executable, str(example), "--port", str(port), "--data-dir", str(data_dir)]
    env = {"PYTHONPATH": str(checkout.resolve())}
    log = root / "kit-against.log"
    with procs.server([*command, *trust], port, env=env, log=log) as process:
        yield Target(_url(port), (process.pid,), _audience(data_dir))


def _example() -> list[str]:
    return [sys.executable, str(EXAMPLE)]


def _url(port: int) -> str:
    return f"http://{procs.HOST}:{port}"


def _audience(data_dir: Path) -> str:
    """The member's identity: the thumbprint URI of the key it created in ``data_dir``."""
    return identity_of(signing_keys(None, data_dir).signing_key().verification_key())


def measure(
    root: Path, requests: int, rounds: int, warmup: int, against: Path | None = None
) -> dict[str, list[float]]:
    issuer = Issuer.create(root)
    with started(root, issuer, against) as targets, httpx.Client(timeout=30) as client:
        found: dict[str, list[float]] = {name: [] for name in targets}
        for target in targets.values():
            window(client, target, issuer, warmup)
        for _ in range(rounds):
            for name, target in targets.items():
                found[name].append(window(client, target, issuer, requests))
    return found


def figures(found: dict[str, list[float]]) -> list[Figure]:
    agent = Spread.of(found["agent"])
    added = {
        name: Spread.of([ms - base for ms, base in zip(found[name], found["agent"], strict=True)])
        for name in found
        if name != "agent"
    }
    per = "CPU ms/request"
    base_name = "the stock a2a-sdk agent alone"
    return [
        figure(
            "(10) CPU added per request by the kit in-process, in front of a stock a2a-sdk agent",
            added["kit"],
            per,
            goal=GOAL_MS,
            goal_on="value",
            note="warm key cache, server process CPU, same run as the agent alone",
        ),
        figure(
            "(10) CPU added per request by the guard sidecar, in front of the same agent",
            added["guard"],
            per,
            note="guard process plus the agent's",
        ),
        *(
            figure(
                f"(10) {label} vs the agent alone",
                Spread.of(found[name]),
                per,
                baseline=agent,
                baseline_name=base_name,
            )
            for name, label in (
                ("kit", "kit member (agent in-process)"),
                ("guard", "guard + agent"),
            )
        ),
        *_against(added, per),
    ]


def _against(added: dict[str, Spread], per: str) -> list[Figure]:
    """The kit of the ``--against`` checkout, when it ran."""
    if "kit_against" not in added:
        return []
    title = "(10) CPU added per request by the kit in-process of the --against checkout"
    note = "same windows as the kit of this checkout"
    return [figure(title, added["kit_against"], per, goal=GOAL_MS, goal_on="value", note=note)]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="sends per window")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="also the kit member of this checkout"
    )
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:  # the client on the load core (as run_load pins it)
        os.sched_setaffinity(0, {int(procs.LOAD_CORE)})
    with tempfile.TemporaryDirectory(prefix="bench-member-") as tmp:
        found = measure(Path(tmp), args.requests, args.rounds, args.warmup, args.against)
    if args.markdown:
        print(markdown(machine(), figures(found)))
    else:
        medians = {name: statistics.median(values) for name, values in found.items()}
        print(json.dumps({"runs": found, "median": medians}))


if __name__ == "__main__":
    main()
