"""Figure (1): remote_risk SendMessage against the a2a-sdk server and a bare FastAPI POST.

For each concurrency the servers are started together on the server core and driven by
the same load generator (:mod:`bench.loadgen`) on the load core, one window of each in
turn, round after round (:mod:`bench.rounds`): remote_risk with a
fresh delegation token per request (full verification, replay protection, its durable
store, its real skill), the a2a-sdk 1.3.0 server with a trivial executor and in-memory
store, the same a2a-sdk server with its ``DatabaseTaskStore`` on SQLite (a durable peer),
the bare FastAPI POST with and without one JWT verification, and the floor
(:mod:`bench.floor`: remote_risk's checks of a send, each made once in a purpose-built
ASGI function), which shows what the goal asks of a path built for the send.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

from bench import procs, rounds, services
from bench.stats import Figure, Spread, figure

KINDS = ("risk", "floor", "sdk", "sdk-db", "fastapi", "fastapi-jwt")
LABELS = {
    "risk": "remote_risk",
    "floor": "the floor",
    "sdk": "a2a-sdk",
    "sdk-db": "a2a-sdk + DatabaseTaskStore on SQLite",
    "fastapi": "bare FastAPI",
    "fastapi-jwt": "FastAPI+JWT",
}


def server(
    root: Path, issuer: services.Issuer, kind: str, concurrency: int
) -> AbstractContextManager[services.Running]:
    """The server ``kind`` names, to be started on the server core."""
    if kind == "risk":
        return services.remote_risk(root, issuer, name=f"risk-c{concurrency}")
    if kind == "floor":
        return services.floor(root, issuer)
    return services.baseline(root, kind, issuer)


def load(
    running: services.Running, issuer: services.Issuer, kind: str, concurrency: int, timing: Any
) -> Any:
    """The load generator's windows against ``running`` (a server of ``kind``)."""
    return procs.run_load(
        "bench.loadgen",
        *(kind, running.url, "--concurrency", str(concurrency), *timing.args()),
        *("--keys", str(issuer.keys_dir), "--audience", running.audience),
        *("--server-pid", str(running.process.pid)),
    )


def drive(root: Path, issuer: services.Issuer, kind: str, concurrency: int, timing: Any) -> Any:
    """``timing``'s windows of one server alone."""
    with server(root, issuer, kind, concurrency) as running:
        return load(running, issuer, kind, concurrency, timing)


def driven(root: Path, issuer: services.Issuer, concurrency: int, timing: Any) -> dict[str, Any]:
    """Every kind's windows at ``concurrency``: the servers up together, the windows taken
    in rounds (:func:`bench.rounds.interleaved`)."""
    with ExitStack() as stack:
        running = {
            kind: stack.enter_context(server(root, issuer, kind, concurrency)) for kind in KINDS
        }
        windows = {
            kind: functools.partial(load, running[kind], issuer, kind, concurrency, timing.window())
            for kind in KINDS
        }
        return rounds.interleaved(windows, timing.runs)


def spreads(result: Any, key: str) -> Spread:
    runs = result["runs"]
    errors = sum(run["errors"] for run in runs)
    if errors:
        raise RuntimeError(f"{result['kind']}: {errors} failed requests: {runs[0]['first_error']}")
    return Spread.of([run[key] for run in runs])


def figures(
    root: Path, issuer: services.Issuer, levels: Sequence[int], timing: Any
) -> list[Figure]:
    found: list[Figure] = []
    for concurrency in levels:
        results = driven(root, issuer, concurrency, timing)
        rps = {kind: spreads(results[kind], "rps") for kind in KINDS}
        at = f"c={concurrency}"
        found.append(
            figure(
                f"(1) remote_risk SendMessage throughput, {at}",
                rps["risk"],
                "req/s",
                baseline=rps["sdk"],
                baseline_name="a2a-sdk",
                goal=">= 3",
                note=f"store: {services.STORE_NAME}",
            )
        )
        found.append(
            figure(
                f"(1) CPU per SendMessage of the server, {at}",
                spreads(results["risk"], "server_cpu_ms"),
                "CPU ms/request",
                baseline=spreads(results["sdk"], "server_cpu_ms"),
                baseline_name="a2a-sdk",
                note="remote_risk's process, every thread, over the measured windows; "
                "lower is better",
            )
        )
        found.extend(floor_figures(results, rps, at))
        for ceiling in ("sdk-db", "fastapi", "fastapi-jwt"):
            found.append(
                figure(
                    f"(1) remote_risk throughput vs {LABELS[ceiling]}, {at}",
                    rps["risk"],
                    "req/s",
                    baseline=rps[ceiling],
                    baseline_name=LABELS[ceiling],
                )
            )
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            found.append(
                figure(
                    f"(1) remote_risk SendMessage {label} latency, {at}",
                    spreads(results["risk"], key),
                    "ms",
                    baseline=spreads(results["sdk"], key),
                    baseline_name="a2a-sdk",
                    note="lower is better",
                )
            )
    return found


def floor_figures(results: dict[str, Any], rps: dict[str, Spread], at: str) -> list[Figure]:
    """The floor against the a2a-sdk (what a path built for the send reaches), and
    remote_risk against the floor (how much of that it reaches)."""
    return [
        figure(
            f"(1f) the floor's SendMessage throughput, {at}",
            rps["floor"],
            "req/s",
            baseline=rps["sdk"],
            baseline_name="a2a-sdk",
            note=f"bench.floor, {spreads(results['floor'], 'server_cpu_ms').median:.2f} CPU ms"
            "/request: the checks of a send made once, purpose-built",
        ),
        figure(
            f"(1f) remote_risk throughput vs the floor, {at}",
            rps["risk"],
            "req/s",
            baseline=rps["floor"],
            baseline_name="the floor",
        ),
    ]
