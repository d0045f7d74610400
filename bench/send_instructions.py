"""Instructions a blocking send costs in remote_risk's app, counted by callgrind.

CPU time on a shared two-core machine moves by a tenth from one window to the next, so a
change worth 2% of a send cannot be seen in it (:mod:`bench.remote_cpu`). The number of
instructions the process executes can: under ``valgrind --tool=callgrind`` it is the same
to within about half a percent from run to run. This tool counts them for the member's
own part of a send, without the network: remote_risk's app (as ``python -m remote_risk``
builds it: its durable store, fresh tokens fully verified, its access line) is called
in process through ASGI, one blocking ``SendMessage`` at a time.

A run is ``warm`` sends and then ``count`` more; the garbage collector's long-lived
objects are frozen after the warm-up (so that a full collection, which falls in one run
and not the other, cannot move the figure by a tenth). Two runs of ``small`` and
``large`` counts differ only by the sends between them, so their difference over that
number is the instructions of one send, start-up left out. What is counted is user-space
work (the interpreter, libsodium, SQLite, pydantic-core, the allocator), never the
kernel's: a change that saves system calls is read with :mod:`bench.remote_cpu`.

``python -m bench.send_instructions [--also NAME=ROOT ...] [--floor]`` prints one JSON
line: each checkout's instructions a send (millions) and its runs; ``--floor`` counts the
member floor of figure (1f) too (:mod:`bench.floor`: every check of a send made once).
Checkouts are measured at once, one per core. It needs valgrind (Debian's ``valgrind``);
each checkout takes about two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import procs

SENDS_FILE = "sends.json"
MEMBER, SDK, FLOOR = "remote_risk", "a2a-sdk", "the floor"
_COLLECTED = re.compile(r"Collected : (\d+)")
_COMPLETED = b'"TASK_STATE_COMPLETED"'


def prepare(root: Path, sends: int) -> None:
    """An issuer, the member's keys in ``root/data`` and ``sends`` bodies with their
    fresh tokens (each lives five minutes), in ``root/sends.json``."""
    from agent_cards.identity import identity_of
    from bench.loadgen import send_message_body
    from bench.services import Issuer
    from bench.tokens import TokenMinter
    from member_kit.trust.issuers import signing_keys

    issuer = Issuer.create(root)
    audience = identity_of(signing_keys(None, root / "data").signing_key().verification_key())
    minter = TokenMinter(issuer.keys.active, audience)
    prepared = []
    for _ in range(sends):
        minter.fill(1)
        handoff_id, token, _ = minter.take()
        prepared.append([send_message_body(handoff_id).decode(), token])
    document = {"jwks": str(issuer.jwks_file), "sends": prepared}
    (root / SENDS_FILE).write_text(json.dumps(document))


def member_app(root: Path, jwks: str) -> Any:
    """remote_risk's app as its command builds it (its logs set up too), its database new."""
    from coordinator.authority.delegator import DEFAULT_ISSUER
    from member_kit.server import limits
    from member_kit.server.app import create_app
    from member_kit.telemetry.logs import member_logs
    from member_kit.telemetry.names import TelemetryNames
    from remote_risk.__main__ import build_parser, settings_from
    from remote_risk.service import risk_member

    for stored in (root / "data").glob("*.db*"):
        stored.unlink()
    trust = f"{DEFAULT_ISSUER}={jwks}"
    args = build_parser().parse_args(["--data-dir", str(root / "data"), "--trust-issuer", trust])
    member_logs(TelemetryNames.of("remote_risk")).setup_from(args, os.environ)
    settings = settings_from(args, os.environ)
    edge = limits.member_limits(os.environ, max_body_bytes=settings.max_body_bytes)
    settings = replace(
        settings, edge=edge, max_body_bytes=edge.max_body_bytes, public_base_url="http://member"
    )
    return create_app(settings, risk_member(settings.model))


def sdk_app() -> Any:
    """The a2a-sdk server of :mod:`bench.baselines` (trivial executor, in-memory store)."""
    from bench.baselines import sdk_app

    return sdk_app("http://member")


def floor_app(root: Path, jwks: str) -> Any:
    """The member floor of figure (1f) (:mod:`bench.floor`) as its command builds it (its
    access line on stderr), its database new. It has no lifespan to run."""
    import logging

    from bench.floor import Floor, app
    from coordinator.authority.delegator import DEFAULT_ISSUER

    for stored in (root / "data").glob("floor.db*"):
        stored.unlink()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return app(Floor(root / "data", DEFAULT_ISSUER, Path(jwks)))


async def drive(root: Path, warm: int, count: int, server: str = MEMBER) -> int:
    """Send the first ``warm + count`` prepared sends to ``server``'s app (the member, the
    a2a-sdk server or the floor); how many completed. Raises if one did not (a refused
    token would make the count meaningless)."""
    from member_kit.telemetry import logs

    document = json.loads((root / SENDS_FILE).read_text())
    lifespan: Any
    if server == FLOOR:
        app, lifespan = floor_app(root, document["jwks"]), nullcontext()
    else:
        app = member_app(root, document["jwks"]) if server == MEMBER else sdk_app()
        lifespan = _running(app)
    try:
        async with lifespan:
            for index, (body, token) in enumerate(document["sends"][: warm + count]):
                if index == warm:
                    gc.collect()
                    gc.freeze()
                await completed(app, body.encode(), token, index)
    finally:
        gc.unfreeze()
        logs.reset()
    return warm + count


class _running:
    """The app's lifespan: started on entry, shut down on exit."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.asked: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.said: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __aenter__(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self.task = asyncio.create_task(self.app(scope, self.asked.get, self.said.put))
        await self._step("startup")

    async def __aexit__(self, *exc_info: object) -> None:
        await self._step("shutdown")
        await self.task

    async def _step(self, step: str) -> None:
        await self.asked.put({"type": f"lifespan.{step}"})
        said = await self.said.get()
        if said["type"] != f"lifespan.{step}.complete":
            raise RuntimeError(f"the app's {step} failed: {said}")


async def completed(app: Any, body: bytes, token: str, index: int) -> None:
    """Send ``index`` through the app; raises unless it was answered with a completed
    task (a refused token would make any count of it meaningless)."""
    answer = await _send(app, body, token)
    if not answer.startswith(b"200 ") or _COMPLETED not in answer:
        raise RuntimeError(f"send {index} was not completed: {answer[:300]!r}")


async def _send(app: Any, body: bytes, token: str) -> bytes:
    """One blocking send through the app: ``b"STATUS "`` and the answer's body."""
    headers = [
        (b"host", b"member"),
        (b"a2a-version", b"1.0"),
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer " + token.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/a2a/jsonrpc", "raw_path": b"/a2a/jsonrpc",
        "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80), "state": {},
    }  # fmt: skip
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    answer = [b"", b""]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays until the answer is sent
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer[0] = b"%d " % message["status"]
        elif message["type"] == "http.response.body":
            answer[1] += message.get("body", b"")

    await app(scope, receive, send)
    return answer[0] + answer[1]


def instructions(stderr: str) -> int:
    """The instructions callgrind reports it collected, from its output."""
    found = _COLLECTED.search(stderr)
    if found is None:
        raise RuntimeError(f"callgrind reported no count:\n{stderr[-2000:]}")
    return int(found.group(1))


def counted(root: Path, checkout: Path, warm: int, count: int, server: str) -> int:
    """Instructions of one process of ``checkout`` making ``warm + count`` sends."""
    # this harness, whichever checkout's product code it runs
    harness = [sys.executable, __file__, "serve", str(root), str(warm), str(count), server]
    return callgrind(harness, checkout, root / f"callgrind.{count}.out")


def callgrind(command: Sequence[str], checkout: Path, out: Path) -> int:
    """Instructions ``command`` executes under callgrind, run with ``checkout``'s code
    (its profile kept in ``out``, for ``callgrind_annotate``)."""
    # the same hashes, so the same dict layouts, every run
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    traced = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]
    done = subprocess.run(traced, capture_output=True, text=True, env=env, cwd=checkout)
    if done.returncode != 0:
        raise RuntimeError(f"{command[1:]} in {checkout} failed:\n{done.stderr[-3000:]}")
    return instructions(done.stderr)


def per_request(runs: dict[int, int]) -> dict[str, Any]:
    """Instructions of one request, from two runs that differ only by their counts."""
    (small, fewer), (large, more) = sorted(runs.items())
    return {"instructions_m": round((more - fewer) / (large - small) / 1e6, 3), "runs": runs}


def per_send(
    root: Path, checkout: Path, server: str, warm: int, small: int, large: int
) -> dict[str, Any]:
    """Instructions of one send to ``server`` as ``checkout`` runs it: two runs, their
    difference per send."""
    root.mkdir(parents=True)
    prepare(root, warm + large)
    return per_request({n: counted(root, checkout, warm, n, server) for n in (small, large)})


def counting_parser(doc: str | None, counts: tuple[int, int, int]) -> argparse.ArgumentParser:
    """The options of a tool that counts instructions: the warm-up and the two runs'
    counts (their defaults ``counts``), and the other checkouts to count in the run."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    warm, small, large = counts
    parser.add_argument("--warm", type=int, default=warm, help="requests before either run")
    parser.add_argument("--small", type=int, default=small, help="requests of the short run")
    parser.add_argument("--large", type=int, default=large, help="requests of the long run")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=ROOT")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:  # the measured process: serve ROOT WARM COUNT SERVER
        root, warm, count = Path(arguments[1]), int(arguments[2]), int(arguments[3])
        sys.stderr = open(root / "server.log", "a")  # noqa: SIM115 (for the process's life)
        asyncio.run(drive(root, warm, count, arguments[4]))
        return
    parser = counting_parser(__doc__, (50, 50, 250))
    parser.add_argument("--floor", action="store_true", help="count the member floor too")
    args = parser.parse_args(arguments)
    counts = (args.warm, args.small, args.large)
    measured = {SDK: (procs.REPO, SDK), "this checkout": (procs.REPO, MEMBER)}
    for name, root in (also.split("=", 1) for also in args.also):
        measured[name] = (Path(root).resolve(), MEMBER)
    if args.floor:
        measured[FLOOR] = (procs.REPO, FLOOR)
    workers = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="bench-send-instructions-") as tmp, workers as pool:
        futures = {
            name: pool.submit(per_send, Path(tmp) / str(n), *how, *counts)
            for n, (name, how) in enumerate(measured.items())
        }
        found = {name: future.result() for name, future in futures.items()}
    sdk = found[SDK]["instructions_m"]
    for figures in found.values():
        figures["sdk_over"] = round(sdk / figures["instructions_m"], 2)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
