"""``python -m bench``: every figure of issue 7, written to results.json and results.md.

Timing comes from the environment so that a development run can be short:
``BENCH_SECONDS`` (each measured window, default 4), ``BENCH_RUNS`` (windows per point,
default 3), ``BENCH_WARMUP`` (default 1), ``BENCH_LEVELS`` (concurrencies, default
``1,8,32``), ``BENCH_LEDGER_EVENTS`` (default 100000) and ``BENCH_ONLY`` (comma-separated
figure numbers, default all: ``BENCH_ONLY=7`` runs only the cost of tracing; see
:mod:`bench.tracing_cost` for its rounds).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import member_overhead, procs, remote_side, rounds, scale_out, services, tracing_cost
from bench.stats import Figure, Spread, figure, machine, write_results

OUT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Timing:
    seconds: float
    runs: int
    warmup: float

    @classmethod
    def from_env(cls) -> Timing:
        return cls(
            float(os.environ.get("BENCH_SECONDS", "4")),
            int(os.environ.get("BENCH_RUNS", "3")),
            float(os.environ.get("BENCH_WARMUP", "1")),
        )

    def window(self) -> Timing:
        """One window of this timing (the rounds are :func:`bench.rounds.interleaved`'s)."""
        return Timing(self.seconds, 1, self.warmup)

    def args(self) -> list[str]:
        return [
            "--seconds",
            str(self.seconds),
            "--runs",
            str(self.runs),
            "--warmup",
            str(self.warmup),
        ]


def _runs(result: Any, key: str) -> Spread:
    runs = result["runs"]
    if any(run["errors"] for run in runs):
        raise RuntimeError(f"{result['kind']}: failed attempts in {runs}")
    return Spread.of([run[key] for run in runs])


def handoff_windows(
    root: Path, issuer: services.Issuer, concurrency: int, timing: Timing
) -> dict[str, Any]:
    """Figure (2)'s windows at ``concurrency``: the coordinator against remote_risk, the
    governed floor against the member floor and the a2a-sdk client against its server,
    the three servers up together and the windows taken in rounds."""
    window = timing.window().args()
    with ExitStack() as stack:
        risk = stack.enter_context(
            services.remote_risk(root, issuer, name=f"handoff-c{concurrency}")
        )
        member_floor = stack.enter_context(services.floor(root, issuer))
        sdk = stack.enter_context(services.baseline(root, "sdk"))
        keyed = ("--keys", str(issuer.keys_dir))
        sides = {
            "ours": ("coordinator", risk, keyed),
            "floor": ("floor", member_floor, keyed),
            "base": ("sdk-client", sdk, ()),
        }
        return rounds.interleaved(
            {
                side: functools.partial(_handoffs, kind, server, concurrency, [*extra, *window])
                for side, (kind, server, extra) in sides.items()
            },
            timing.runs,
        )


def _handoffs(kind: str, server: services.Running, concurrency: int, args: list[str]) -> Any:
    return procs.run_load(
        "bench.handoffs",
        *(kind, server.url, "--concurrency", str(concurrency)),
        *("--server-pid", str(server.process.pid), *args),
    )


def handoff_figures(
    root: Path, issuer: services.Issuer, levels: list[int], timing: Timing
) -> list[Figure]:
    found = []
    for concurrency in levels:
        windows = handoff_windows(root, issuer, concurrency, timing)
        ours, floor, base = windows["ours"], windows["floor"], windows["base"]
        found.append(
            figure(
                f"(2) governed handoffs through the coordinator, c={concurrency}",
                _runs(ours, "rps"),
                "handoffs/s",
                baseline=_runs(base, "rps"),
                baseline_name="a2a-sdk client round trips/s",
                goal=">= 1.5",
                note=f"CPU of the coordinator {_runs(ours, 'cpu_ms').median:.2f} ms/handoff, "
                f"of the a2a-sdk client {_runs(base, 'cpu_ms').median:.2f} ms/round trip",
            )
        )
        found.append(cpu_per_handoff(ours, base, concurrency))
        found.extend(governed_floor_figures(ours, floor, base, concurrency))
        found.append(
            figure(
                f"(8) group commit: durable points per commit, c={concurrency}",
                _runs(ours, "points_per_commit"),
                "points/commit",
                note=f"largest {max(run['largest_commit'] for run in ours['runs'])}; "
                f"{_in_place(ours['runs'][-1])} of them on the event loop's thread; "
                f"commits by size {ours['runs'][-1]['commits']}",
            )
        )
        found.append(
            figure(
                f"(4) ledger appends while handoffs run, c={concurrency}",
                _runs(ours, "ledger_appends_per_s"),
                "events/s",
                note=f"{ours['runs'][0]['events_per_handoff']:.0f} events per handoff",
            )
        )
    return found


def _in_place(run: dict[str, Any]) -> str:
    """The share of a window's commits made on the event loop's thread, as a percentage
    (a window of a checkout from before the writer committed in place has none)."""
    commits = sum(run["commits"].values())
    return f"{100 * run.get('commits_in_place', 0) / max(1, commits):.0f}%"


def cpu_per_handoff(ours: Any, base: Any, concurrency: int) -> Figure:
    """Figure (2)'s CPU: both sides of a governed handoff (the coordinator and remote_risk)
    against both sides of the a2a-sdk round trip (its client and its server)."""
    sides = {
        name: (_runs(result, "cpu_ms").median, _runs(result, "server_cpu_ms").median)
        for name, result in (("ours", ours), ("sdk", base))
    }
    both = {
        name: Spread.of([run["cpu_ms"] + run["server_cpu_ms"] for run in result["runs"]])
        for name, result in (("ours", ours), ("sdk", base))
    }
    return figure(
        f"(2) CPU per governed handoff, both sides, c={concurrency}",
        both["ours"],
        "CPU ms",
        baseline=both["sdk"],
        baseline_name="a2a-sdk client + server per round trip",
        note=f"coordinator {sides['ours'][0]:.2f} + remote_risk {sides['ours'][1]:.2f}; "
        f"a2a-sdk client {sides['sdk'][0]:.2f} + server {sides['sdk'][1]:.2f}; "
        "medians of the windows, lower is better",
    )


def governed_floor_figures(ours: Any, floor: Any, base: Any, concurrency: int) -> list[Figure]:
    """The governed floor with the member floor (:mod:`bench.floor_governed`, each step
    of a handoff made once) against the a2a-sdk round trip, and ours against that floor."""
    at = f"c={concurrency}"
    cpu = f"{_runs(floor, 'cpu_ms').median:.2f} + {_runs(floor, 'server_cpu_ms').median:.2f}"
    return [
        figure(
            f"(2f) governed handoffs of the floor, {at}",
            _runs(floor, "rps"),
            "handoffs/s",
            baseline=_runs(base, "rps"),
            baseline_name="a2a-sdk client round trips/s",
            note=f"bench.floor_governed against bench.floor, CPU {cpu} ms a handoff",
        ),
        figure(
            f"(2f) governed handoffs through the coordinator vs the floor, {at}",
            _runs(ours, "rps"),
            "handoffs/s",
            baseline=_runs(floor, "rps"),
            baseline_name="the floor",
        ),
    ]


def token_figures() -> list[Figure]:
    result = procs.run_load("bench.token_cost")
    verify = Spread.of(result["verify_us"])
    decode = Spread.of(result["decode_us"])
    return [
        figure(
            "(3) delegation token verification",
            verify,
            "us/token",
            baseline=decode,
            baseline_name="bare jwt.decode",
            goal="<= 1.5",
        ),
        *chain_figures(),
    ]


def chain_figures() -> list[Figure]:
    """(3b) a three-hop chain checked at its leaf (the leaf verified as today, the chain
    offline) and (3c) the same chain bound to its holders, the leaf presented with a
    fresh holder proof, each against the one-hop token today, in the same run."""
    result = procs.run_load("bench.chain_cost")
    one_hop = Spread.of(result["one_hop_us"])
    return [
        figure(
            "(3b) three-hop chain check (leaf + offline chain)",
            Spread.of(result["three_hop_us"]),
            "us/chain",
            baseline=one_hop,
            baseline_name="one-hop token verify today",
            note="no holder proof on either side",
        ),
        figure(
            "(3c) three-hop chain check with holder proof (leaf + DPoP proof + offline chain)",
            Spread.of(result["three_hop_holder_us"]),
            "us/chain",
            baseline=one_hop,
            baseline_name="one-hop token verify today",
            note="children bound to their holders, a fresh proof per call, same run as (3b)",
        ),
    ]


def ledger_figures() -> list[Figure]:
    events = os.environ.get("BENCH_LEDGER_EVENTS", "100000")
    result = procs.run_load("bench.ledger_verify", "--events", events, "--json")
    return [
        figure(
            f"(4) audit verify over {int(events):,} events",
            Spread.of(result["verify_per_s"]),
            "events/s",
            goal=">= 50000",
            goal_on="value",
        ),
        figure(
            f"(4) audit verify (chain and tree) vs the chain-only walk, {int(events):,} events",
            Spread.of(result["verify_per_s"]),
            "events/s",
            baseline=Spread.of(result["chain_only_per_s"]),
            baseline_name="chain-only walk",
            goal=">= 1",
        ),
        figure(
            f"(4) batched ledger append ({int(events):,} events, 500 per commit)",
            Spread.of(result["append_per_s"]),
            "events/s",
        ),
    ]


def memory_figures(root: Path, issuer: services.Issuer) -> list[Figure]:
    sdk = procs.run_load("bench.memory", "sdk", "--sizes", "1000", "1000")
    risk = procs.run_load("bench.memory", "risk", "--sizes", "1000", "1000")
    with services.remote_risk(root, issuer, name="memory") as server:
        coordinator = procs.run_load(
            "bench.memory",
            "coordinator",
            "--url",
            server.url,
            "--keys",
            str(issuer.keys_dir),
            # past the warm-up of its caches (SQLite's page cache, the pools): a
            # first batch of 60 alone read 9-14 KB a handoff that a longer run shows
            # flat (1,200 handoffs: RSS unchanged from the 800th on)
            "--sizes",
            "200",
            "400",
            "400",
            "400",
        )
    sdk_kb = steady_growth(sdk) / 1024

    def per_item(result: Any, what: str) -> Figure:
        batches = ", ".join(f"{rss / 1024:.2f}" for rss in result["rss"])
        return figure(
            f"(5) memory retained per finished {what}",
            steady_growth(result) / 1024,
            "KB",
            baseline=sdk_kb,
            baseline_name="a2a-sdk per task",
            goal="<= 2",  # issue 20: at most 2 KB per finished handoff or task, bounded
            goal_on="value",
            note=(
                f"steady state: growth over the last two of batches {result['sizes']} (the"
                f" last of two), per item; RSS growth {batches} KB each"
            ),
        )

    return [
        per_item(risk, "task in remote_risk"),
        per_item(coordinator, "handoff in the coordinator"),
    ]


def steady_growth(result: Any) -> float:
    """Bytes of resident set kept per item once caches are warm: over the last two
    batches when there are three or more, else over the last. SQLite's page cache fills
    over the coordinator's first 600 or so handoffs (about 12 KB a handoff in its second
    batch, then 2 and 0 while the Python heap stays flat), and one batch alone reads 0
    or several KB an item by whether the allocator took a new arena within it."""
    steady = 2 if len(result["sizes"]) >= 3 else 1
    sizes, rss = result["sizes"][-steady:], result["rss"][-steady:]
    return sum(each * size for each, size in zip(rss, sizes, strict=True)) / sum(sizes)


def fanout_figures(root: Path, issuer: services.Issuer) -> list[Figure]:
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                services.remote_risk(root, issuer, name=f"fanout-{index}", delay=0.2)
            ).url
            for index in range(4)
        ]
        result = procs.run_load("bench.fanout", *urls, "--keys", str(issuer.keys_dir))
    return [
        figure(
            "(6) fan-out: four 200 ms specialists in parallel",
            Spread.of(result["four_s"]),
            "s",
            baseline=Spread.of(result["one_s"]),
            baseline_name="one consultation",
            goal="<= 1.2",
        )
    ]


def member_overhead_figures(timing: Timing) -> list[Figure]:
    """Figure (10): sends per window scale with ``BENCH_SECONDS`` (about 100 a second)."""
    requests = str(max(50, int(timing.seconds * 100)))
    rounds = str(max(3, timing.runs))
    result = procs.run_load("bench.member_overhead", "--requests", requests, "--rounds", rounds)
    return member_overhead.figures(result["runs"])


def main() -> None:
    timing = Timing.from_env()
    levels = [int(level) for level in os.environ.get("BENCH_LEVELS", "1,8,32").split(",")]
    only = set(os.environ.get("BENCH_ONLY", "1,2,3,4,5,6,7,9,10").split(","))
    machine_line = machine()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        root = Path(tmp)
        issuer = services.Issuer.create(root)
        steps: list[tuple[str, Callable[[], list[Figure]]]] = [
            ("1", lambda: remote_side.figures(root, issuer, levels, timing)),
            ("2", lambda: handoff_figures(root, issuer, levels, timing)),
            ("3", token_figures),
            ("4", ledger_figures),
            ("5", lambda: memory_figures(root, issuer)),
            ("6", lambda: fanout_figures(root, issuer)),
            ("7", lambda: tracing_cost.figures(root, issuer, timing.seconds, timing.warmup)),
            ("9", lambda: scale_out.figures(root, issuer, timing.args())),
            ("10", lambda: member_overhead_figures(timing)),
        ]
        for number, step in steps:
            if number in only:
                print(f"figure ({number}) ...", file=sys.stderr, flush=True)
                figures.extend(step())
    write_results(OUT, machine_line, figures)
    print((OUT / "results.md").read_text())


if __name__ == "__main__":
    main()
