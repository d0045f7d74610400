"""Where a request's time goes, step by step, timed in place.

cProfile weighs Python calls above native work, and a function timed alone runs with
its code and data hot in the caches; a request's steps do neither. On the machines of
issue 34 a line of the access log costs 18 µs in a tight loop and 116 in place
(docs/benchmarks.md, "The member's own work"). This tool times named functions inside
the real request path: each is wrapped where its callers look it up (a coroutine
function is awaited), and its wall time is summed over the measured requests, a step
nested in another counted in both.

- ``member``: remote_risk's app, in process, one blocking send at a time: the sends, the
  app and the lifespan of :mod:`bench.send_instructions` (its durable store, fresh
  tokens fully verified, its access line);
- ``coordinator``: governed handoffs, one at a time, against remote_risk on loopback
  (:func:`bench.handoff_instructions.drive_coordinator`; its measured run registers the
  agent once, as every run does);
- ``governed``: the member's steps of those same handoffs, timed in remote_risk's own
  process (run by :func:`serve_timed`): the send as figure (2) makes it, with its
  request digest, its tree head and its trace context, the coordinator on the load core.
  Each wrapper adds its own cost to the server's CPU a send, so that figure is read
  from a run that times one step.

``python -m bench.steps member|coordinator|governed [--warm W] [--count N]
[MODULE:QUALNAME ...]`` prints one JSON line: the wall and CPU time (the process's,
every thread: the server's for ``governed``) of a request in µs, and each step's µs and
calls a request. Without names, :data:`STEPS` of the side.
A function imported by name into another module is named where it is called from
(``coordinator.dispatch.attempt.settling:admit_task``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench import send_instructions as sends

MEMBER, COORDINATOR, GOVERNED = "member", "coordinator", "governed"
SERVE = "serve"  # remote_risk with its steps timed: what ``governed`` runs (serve_timed)
START, END = signal.SIGUSR1, signal.SIGUSR2  # the measured window's start and end
STEPS = {
    MEMBER: (
        "agent_cards.telemetry.http:ObservedHTTP._record",
        "member_kit.trust.verifier:DelegationVerifier.authenticate",
        "member_kit.trust.token_format:check_signature",
        "member_kit.server.authorization.hook:DelegationAuthorizer.__call__",
        "member_kit.server.jsonrpc:parse_params",
        "member_kit.tasks.sql:SQLTaskStore.create",
        "member_kit.audit.receipts:ReceiptIssuer.stamp",
        "member_kit.audit.log:DecisionLedger.append_covered",
        "member_kit.tasks.sql:SQLTaskStore._write_unwritten",
        "member_kit.storage.engine:_Turn.commit",
        "member_kit.server.jsonrpc:result_body",
    ),
    COORDINATOR: (
        "coordinator.dispatch.attempt.driver:HandoffDriver.mint",
        "coordinator.dispatch.attempt.remote_calls:send",
        "coordinator.remote.wire.client:A2AClient.exchange",
        "coordinator.dispatch.attempt.attempt_state:AttemptState.durable_point",
        "coordinator.audit.log.chain:Ledger._write",
        "coordinator.storage.runs:RunStore.ended",
        "coordinator.dispatch.attempt.settling:settle",
        "coordinator.dispatch.attempt.settling:admit_task",
        "coordinator.handoff.book:HandoffBook.commit",
    ),
}


class Steps:
    """The wall time and calls of each step while :attr:`measuring` (any thread)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.measuring = False
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        if self.measuring:
            with self._lock:
                self.seconds[name] += seconds
                self.calls[name] += 1

    def timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function``, its calls timed as step ``name``."""
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await function(*args, **kwargs)
                finally:
                    self.add(name, time.perf_counter() - started)

            return timed_coroutine

        @functools.wraps(function)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - started)

        return timed_call


def _owner(name: str) -> tuple[Any, str]:
    """The object holding the function ``MODULE:QUALNAME`` names, and its attribute."""
    module_name, _, qualname = name.partition(":")
    if not qualname:
        raise ValueError(f"{name!r}: name a step as MODULE:QUALNAME")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        raise ValueError(f"{name!r}: no module {module_name!r}") from None
    *path, attribute = qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
    found = inspect.getattr_static(owner, attribute, None) if owner is not None else None
    if isinstance(found, staticmethod | classmethod):
        raise ValueError(f"{name!r}: a static or class method is not timed here")
    if not callable(found):
        raise ValueError(f"{name!r}: no such function")
    return owner, attribute


_ABSENT = object()


@contextmanager
def wrapped(names: Sequence[str]) -> Iterator[Steps]:
    """Each named function timed while the block runs; every one restored after it (a
    method a class inherits is timed on that class, and taken off it again)."""
    steps = Steps()
    owners = [(name, *_owner(name)) for name in dict.fromkeys(names)]  # all found first
    kept = [
        (owner, attribute, vars(owner).get(attribute, _ABSENT)) for _, owner, attribute in owners
    ]
    try:
        for name, owner, attribute in owners:
            setattr(owner, attribute, steps.timed(name, getattr(owner, attribute)))
        yield steps
    finally:
        for owner, attribute, original in reversed(kept):
            if original is _ABSENT:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, original)


@contextmanager
def window(steps: Steps) -> Iterator[list[float]]:
    """The steps measured while the block runs; its wall and CPU seconds (the process's,
    every thread) in the list yielded, once it has run."""
    gc.collect()
    took: list[float] = []
    steps.measuring = True
    started, cpu = time.perf_counter(), time.process_time()
    try:
        yield took
    finally:
        steps.measuring = False
        took += [time.perf_counter() - started, time.process_time() - cpu]


def figures(steps: Steps, count: int, wall: float, cpu: float) -> dict[str, Any]:
    """A request's wall and CPU time, and each step's time and calls, in µs a request."""
    per = 1e6 / count
    return {
        "requests": count,
        "wall_us": round(wall * per, 1),
        "cpu_us": round(cpu * per, 1),
        "steps": {
            name: {"us": round(seconds * per, 1), "calls": round(steps.calls[name] / count, 2)}
            for name, seconds in sorted(steps.seconds.items(), key=lambda step: -step[1])
        },
    }


def member(names: Sequence[str], warm: int, count: int) -> dict[str, Any]:
    """``warm`` sends, then ``count`` measured, through remote_risk's app in process."""
    from member_kit.telemetry import logs

    with tempfile.TemporaryDirectory(prefix="bench-steps-") as directory:
        root = Path(directory)
        sends.prepare(root, warm + count)
        document = json.loads((root / sends.SENDS_FILE).read_text())
        prepared = [(body.encode(), token) for body, token in document["sends"]]
        with wrapped(names) as steps:  # before the app holds any of them
            app = sends.member_app(root, document["jwks"])
            try:
                took = asyncio.run(_sends(steps, app, prepared, warm))
            finally:
                logs.reset()
    return figures(steps, count, *took)


async def _sends(
    steps: Steps, app: Any, prepared: Sequence[tuple[bytes, str]], warm: int
) -> list[float]:
    async with sends._running(app):
        for index, (body, token) in enumerate(prepared[:warm]):
            await sends.completed(app, body, token, index)
        with window(steps) as took:
            for index, (body, token) in enumerate(prepared[warm:], start=warm):
                await sends.completed(app, body, token, index)
    return took


def coordinator(names: Sequence[str], warm: int, count: int) -> dict[str, Any]:
    """``warm`` governed handoffs, then ``count`` measured, against remote_risk."""
    from bench import services
    from bench.handoff_instructions import drive_coordinator
    from coordinator import loop

    with tempfile.TemporaryDirectory(prefix="bench-steps-") as directory, ExitStack() as stack:
        root = Path(directory)
        issuer = services.Issuer.create(root)
        remote = stack.enter_context(services.remote_risk(root, issuer, capacity=100_000))
        keys = str(issuer.keys_dir)
        steps = stack.enter_context(wrapped(names))
        loop.run(drive_coordinator(remote.url, keys, warm, 0))
        with window(steps) as took:
            loop.run(drive_coordinator(remote.url, keys, 0, count))
    return figures(steps, count, *took)


def governed(names: Sequence[str], warm: int, count: int) -> dict[str, Any]:
    """``warm`` governed handoffs, then ``count`` measured, with the steps timed inside
    remote_risk's process (:func:`serve_timed`) and its CPU read there."""
    from bench import services
    from bench.handoff_instructions import drive_coordinator
    from coordinator import loop

    with tempfile.TemporaryDirectory(prefix="bench-steps-") as directory, ExitStack() as stack:
        root = Path(directory)
        issuer = services.Issuer.create(root)
        out = root / "steps.json"
        runner = ("bench.steps", SERVE, "--out", str(out), *names, "--")
        remote = stack.enter_context(
            services.remote_risk(root, issuer, capacity=100_000, runner=runner)
        )
        keys = str(issuer.keys_dir)
        stack.enter_context(_on_load_core())  # as figure (2) drives it: apart from the server
        loop.run(drive_coordinator(remote.url, keys, warm, 0))
        _signalled(remote.process, START, out.with_suffix(".started"))
        loop.run(drive_coordinator(remote.url, keys, 0, count))
        _signalled(remote.process, END, out)
        found = json.loads(out.read_text())
    steps = Steps()
    steps.seconds.update(found["seconds"])
    steps.calls.update(found["calls"])
    return figures(steps, count, found["wall"], found["cpu"])


@contextmanager
def _on_load_core() -> Iterator[None]:
    """This process on the load core while the block runs (where the machine has two)."""
    from bench import procs

    kept = os.sched_getaffinity(0)
    if (os.cpu_count() or 1) > int(procs.LOAD_CORE):
        os.sched_setaffinity(0, {int(procs.LOAD_CORE)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, kept)


def _signalled(process: subprocess.Popen[bytes], signum: int, written: Path) -> None:
    """Send ``signum`` to the server and wait until it has written ``written``."""
    process.send_signal(signum)
    deadline = time.monotonic() + 30
    while not written.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the timed server did not answer signal {signum}")
        time.sleep(0.01)


def serve_timed(argv: Sequence[str]) -> None:
    """``python -m bench.steps serve --out FILE NAME... -- ARGS``: remote_risk with
    ``ARGS``, the named steps timed in the window between :data:`START` and :data:`END`
    (each signal answered by a file: ``FILE`` with a ``.started`` suffix, then ``FILE``
    holding the steps' seconds and calls and the window's wall and CPU seconds)."""
    from remote_risk.__main__ import main as remote_risk

    separator = list(argv).index("--")
    parser = argparse.ArgumentParser(prog="bench.steps serve")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("names", nargs="+", metavar="MODULE:QUALNAME")
    args = parser.parse_args(argv[:separator])
    with wrapped(args.names) as steps:
        measured = window(steps)
        took: list[list[float]] = []  # the window's wall and CPU seconds, once it ends

        def start(*_: object) -> None:
            took.append(measured.__enter__())
            args.out.with_suffix(".started").touch()

        def end(*_: object) -> None:
            measured.__exit__(None, None, None)
            wall, cpu = took[0]
            document = {"seconds": steps.seconds, "calls": steps.calls, "wall": wall, "cpu": cpu}
            args.out.write_text(json.dumps(document))

        signal.signal(START, start)
        signal.signal(END, end)
        remote_risk(argv[separator + 1 :])


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [SERVE]:
        serve_timed(arguments[1:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("side", choices=[MEMBER, COORDINATOR, GOVERNED])
    parser.add_argument("names", nargs="*", metavar="MODULE:QUALNAME")
    parser.add_argument("--warm", type=int, default=300, help="requests before the measured")
    parser.add_argument("--count", type=int, default=3000, help="requests measured")
    args = parser.parse_intermixed_args(arguments)  # names before or after the options
    if args.count < 1:
        parser.error("--count must be at least 1")
    names = args.names or STEPS[COORDINATOR if args.side == COORDINATOR else MEMBER]
    try:
        for name in names:
            _owner(name)  # a wrong name is the caller's, refused before any work
    except ValueError as exc:
        parser.error(str(exc))
    run = {MEMBER: member, COORDINATOR: coordinator, GOVERNED: governed}[args.side]
    print(json.dumps({"side": args.side, **run(names, args.warm, args.count)}))


if __name__ == "__main__":
    main()
