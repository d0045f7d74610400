"""Figure (1b): remote_risk's CPU per blocking SendMessage against the a2a-sdk server's.

Both servers run at once, pinned to the server core: remote_risk as deployed
(``python -m remote_risk``: a fresh delegation token per request, fully verified, its
durable store, its real skill) and the a2a-sdk server of :mod:`bench.baselines` (trivial
executor, in-memory store). Each gets the same sequence of blocking SendMessage requests
on one keep-alive connection, one at a time; what counts is the CPU time (user + system,
``/proc/PID/stat``, every thread) the server process spent over the window, divided by
the requests. Windows alternate between the servers, ``rounds`` times, after a warm-up;
the median round is used, so a busy machine shifts both alike.

``--also NAME=ROOT`` measures, in the same rounds, remote_risk as another checkout of this
repository at ``ROOT`` runs it (e.g. the main branch against a change): the A/B of a
change, with the a2a-sdk server as the common yardstick. ``python -m bench.remote_cpu``
prints one JSON line (CPU ms per request of each window, by server, and their medians).

``--concurrency N`` (N > 1) drives each window with the load generator of figure (1)
instead (:mod:`bench.loadgen`, ``N`` requests in flight for ``--seconds``, a fresh token
each), where figure (1) reads remote_risk at c=8 and c=32: what a change to how sends
share the process (grouping their commits, say) is read by; one at a time it cannot
show.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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
from bench.member_overhead import Target, cpu_per_send
from bench.services import Issuer
from bench.tokens import TokenMinter
from coordinator.authority.delegator import DEFAULT_ISSUER
from member_kit.trust.issuers import signing_keys

RPC = "/a2a/jsonrpc"
SDK = "a2a-sdk"
OURS = "remote_risk"
FLOOR = "floor"
FLOOR_TABLES = "floor on the member's tables"
FLOOR_MODELS = "floor with the member's models"
# What the load generator sends each server (``risk``: remote_risk of any checkout).
LOAD_KINDS = {SDK: "sdk", FLOOR: "floor", FLOOR_TABLES: "floor", FLOOR_MODELS: "floor"}


@contextmanager
def server_process(command: Sequence[str], port: int, root: Path, log: Path) -> Iterator[int]:
    """``command`` run from checkout ``root`` on the server core; yields its pid."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("PYTHONDEVMODE", None)
    with open(log, "ab") as sink:
        process = subprocess.Popen(
            procs.pinned(command, procs.SERVER_CORE),
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
            cwd=root,
        )
        try:
            procs.wait_for_port(port, process)
            yield process.pid
        finally:
            procs.stop(process)


def _risk(stack: ExitStack, root: Path, issuer: Issuer, checkout: Path, name: str) -> Target:
    port = procs.free_port()
    data_dir = root / f"{name}-data"
    trust = f"{DEFAULT_ISSUER}={issuer.jwks_file}"
    command = procs.python(
        "remote_risk", "--port", str(port), "--data-dir", str(data_dir), "--trust-issuer", trust
    )
    pid = stack.enter_context(server_process(command, port, checkout, root / f"{name}.log"))
    audience = identity_of(signing_keys(None, data_dir).signing_key().verification_key())
    return Target(f"http://{procs.HOST}:{port}", (pid,), audience)


def _floor(
    stack: ExitStack, root: Path, issuer: Issuer, module: str = "bench.floor", *extra: str
) -> Target:
    """The floor (:mod:`bench.floor`): remote_risk's checks, each once, purpose-built;
    or, by ``module``, a floor of :mod:`bench.floor_tables`."""
    port = procs.free_port()
    data_dir = root / f"floor-{port}-data"
    trust = f"{DEFAULT_ISSUER}={issuer.jwks_file}"
    args = ("--port", str(port), "--data-dir", str(data_dir), "--trust-issuer", trust)
    command = procs.python(module, *args, *extra)
    log = root / f"floor-{port}.log"
    pid = stack.enter_context(server_process(command, port, procs.REPO, log))
    audience = identity_of(signing_keys(None, data_dir).signing_key().verification_key())
    return Target(f"http://{procs.HOST}:{port}", (pid,), audience)


def sdk_server(stack: ExitStack, root: Path) -> Target:
    port = procs.free_port()
    command = procs.python("bench.baselines", "sdk", "--port", str(port))
    pid = stack.enter_context(server_process(command, port, procs.REPO, root / "sdk.log"))
    return Target(f"http://{procs.HOST}:{port}", (pid,), None)


def prepared_sends(
    target: Target, minter: TokenMinter, count: int
) -> list[tuple[bytes, dict[str, str]]]:
    prepared: list[tuple[bytes, dict[str, str]]] = []
    for _ in range(count):
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        if target.audience is None:
            handoff_id = f"h-{len(prepared)}"
        else:
            minter.audience = target.audience
            minter.fill(1)
            handoff_id, token, _ = minter.take()
            headers["Authorization"] = "Bearer " + token
        prepared.append((send_message_body(handoff_id), headers))
    return prepared


def window(client: httpx.Client, target: Target, minter: TokenMinter, count: int) -> float:
    """CPU milliseconds per request the target's process spent on ``count`` sends."""
    return cpu_per_send(client, target, prepared_sends(target, minter, count))


@dataclass(frozen=True)
class Load:
    """Windows under the load generator: ``concurrency`` in flight for ``seconds``."""

    concurrency: int
    seconds: float = 4.0
    warmup: float = 0.5


def loaded_window(target: Target, kind: str, issuer: Issuer, load: Load) -> float:
    """CPU milliseconds per request the target's process spent while the load generator
    kept ``load.concurrency`` sends of ``kind`` in flight for ``load.seconds``."""
    tokens: tuple[str, ...] = ()
    if target.audience is not None:
        tokens = ("--keys", str(issuer.keys_dir), "--audience", target.audience)
    found = procs.run_load(
        "bench.loadgen",
        *(kind, target.url, "--concurrency", str(load.concurrency)),
        *("--seconds", str(load.seconds), "--warmup", str(load.warmup), "--runs", "1"),
        *(*tokens, "--server-pid", str(target.pids[0])),
    )
    (run,) = found["runs"]
    if run["errors"]:
        raise RuntimeError(f"{target.url}: {run['first_error']}")
    return float(run["server_cpu_ms"])


def measure(
    root: Path,
    checkouts: dict[str, Path],
    requests: int,
    rounds: int,
    warmup: int,
    floor: bool = False,
    load: Load | None = None,
) -> dict[str, list[float]]:
    issuer = Issuer.create(root)
    minter = TokenMinter(issuer.keys.active, "")
    with ExitStack() as stack, httpx.Client(timeout=30) as client:
        targets = {SDK: sdk_server(stack, root)}
        for name, checkout in checkouts.items():
            targets[name] = _risk(stack, root, issuer, checkout, name)
        if floor:
            targets[FLOOR] = _floor(stack, root, issuer)
            targets[FLOOR_TABLES] = _floor(stack, root, issuer, "bench.floor_tables")
            targets[FLOOR_MODELS] = _floor(stack, root, issuer, "bench.floor_tables", "--models")
        for target in targets.values():
            if load is None:  # the load generator warms each window up itself
                window(client, target, minter, warmup)
        found: dict[str, list[float]] = {name: [] for name in targets}
        for _ in range(rounds):
            for name, target in targets.items():
                if load is None:
                    found[name].append(window(client, target, minter, requests))
                else:
                    kind = LOAD_KINDS.get(name, "risk")
                    found[name].append(loaded_window(target, kind, issuer, load))
    return found


@contextmanager
def on_load_core() -> Iterator[None]:
    """This process (the sends' client) on the load core while it measures, then back
    where it was."""
    if (os.cpu_count() or 1) < 2:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {int(procs.LOAD_CORE)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="sends per window")
    parser.add_argument(
        "--concurrency", type=int, default=1, help="above 1: windows under the load generator"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="with --concurrency")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument(
        "--also", action="append", default=[], metavar="NAME=ROOT", help="another checkout"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also the floors: bench.floor and both of bench.floor_tables",
    )
    args = parser.parse_args(argv)
    checkouts = {OURS: procs.REPO}
    for entry in args.also:
        name, _, where = entry.partition("=")
        checkouts[name] = Path(where).resolve()
    load = Load(args.concurrency, args.seconds) if args.concurrency > 1 else None
    with on_load_core(), tempfile.TemporaryDirectory(prefix="bench-remote-cpu-") as tmp:
        root = Path(tmp)
        found = measure(root, checkouts, args.requests, args.rounds, args.warmup, args.floor, load)
    medians = {name: statistics.median(values) for name, values in found.items()}
    ratios = {name: medians[SDK] / medians[name] for name in found if name != SDK}
    print(json.dumps({"runs": found, "median": medians, "sdk_over": ratios}), file=sys.stdout)


if __name__ == "__main__":
    main()
