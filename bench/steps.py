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
  agent once, as every run does).

``python -m bench.steps member|coordinator [--warm W] [--count N] [MODULE:QUALNAME ...]``
prints one JSON line: the wall and CPU time (the process's, every thread) of a request
in µs, and each step's µs and calls a request. Without names, :data:`STEPS` of the side.
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
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench import send_instructions as sends

MEMBER, COORDINATOR = "member", "coordinator"
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("side", choices=[MEMBER, COORDINATOR])
    parser.add_argument("names", nargs="*", metavar="MODULE:QUALNAME")
    parser.add_argument("--warm", type=int, default=300, help="requests before the measured")
    parser.add_argument("--count", type=int, default=3000, help="requests measured")
    args = parser.parse_intermixed_args(argv)  # names before or after the options
    if args.count < 1:
        parser.error("--count must be at least 1")
    names = args.names or STEPS[args.side]
    try:
        for name in names:
            _owner(name)  # a wrong name is the caller's, refused before any work
    except ValueError as exc:
        parser.error(str(exc))
    run = member if args.side == MEMBER else coordinator
    print(json.dumps({"side": args.side, **run(names, args.warm, args.count)}))


if __name__ == "__main__":
    main()
