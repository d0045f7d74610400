"""Instructions a governed handoff costs the coordinator, counted by callgrind.

Figure (2)'s counterpart of :mod:`bench.send_instructions`: what one governed handoff
(:func:`bench.governed.handoff`: admission, the minted token, the intent point, one
blocking send, the receipt, return admission, the outcome point, every fact in the
ledger) costs the coordinator's process in instructions, beside what one round trip
costs the a2a-sdk client. Each client runs under ``valgrind --tool=callgrind`` against a
server running normally on loopback (remote_risk for the coordinator, the a2a-sdk server
of :mod:`bench.baselines` for its client), one request at a time; two runs of ``small``
and ``large`` requests after the same warm-up give one request's instructions as their
difference (start-up, registration and the writer thread's set-up left out). Every
thread of the client is counted, its ledger's writer included; the kernel's work is not.

``python -m bench.handoff_instructions [--also NAME=ROOT ...] [--floor]`` prints one JSON
line: the a2a-sdk client's and each checkout's coordinator's instructions a request
(millions), and the client's over each (figure (2) asks the coordinator for 1.5x its round
trips). ``--floor`` counts the governed floor of figure (2f) too (:mod:`bench.floor_governed`
against the member floor): every step of a handoff made once, the target of a path built
for the purpose.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import procs

COORDINATOR, SDK_CLIENT, FLOOR = "coordinator", "a2a-sdk client", "the governed floor"


async def drive_coordinator(url: str, keys_dir: str, warm: int, count: int) -> int:
    """``warm + count`` governed handoffs to the remote_risk at ``url``, one at a time;
    raises unless each was accepted."""
    from agent_cards.keys import load_key_set
    from bench import governed
    from contracts.handoff import HandoffState
    from coordinator.remote.wire.client import A2AClient

    keys = load_key_set(keys_dir)
    with tempfile.TemporaryDirectory(prefix="bench-handoff-instructions-") as root:
        ws = governed.workspace(Path(root))
        async with A2AClient() as client:
            agent = await governed.register(client, ws, url, "remote-risk")
            for index in range(warm + count):
                _freeze_after_warm_up(index, warm)
                _head_held_after_warm_up(ws, index, warm)
                outcome = await governed.handoff(client, agent, keys, ws)
                if outcome.record.state is not HandoffState.ACCEPTED:
                    raise RuntimeError(f"handoff {index} ended {outcome.record.state.value}")
            _sign_last_head(ws, keys)
        ws.close()
    return warm + count


def _head_held_after_warm_up(ws: Any, index: int, warm: int) -> None:
    """No new tree head is signed during the measured handoffs.

    A head is signed when the last is a second old, after reading back and checking the
    events since: natively once in some hundreds of handoffs, but under callgrind, which
    runs the process some fifty times slower, once in a few, which counted signatures a
    real run does not pay (13.19 million instructions a handoff against 13.00 held). Held
    here, the head is signed once at the end of each run instead (:func:`_sign_last_head`),
    so the difference of the two runs holds the read-back of every measured event, as a
    native run pays it, and no signature (a native run's share of one is a few hundredths
    of a percent)."""
    if index == warm:
        from coordinator.audit.log.current_head import current_head

        current_head(ws.engine()).min_interval = float("inf")


def _sign_last_head(ws: Any, keys: Any) -> None:
    from coordinator.audit.log.current_head import current_head
    from coordinator.authority.delegator import DEFAULT_ISSUER

    head = current_head(ws.engine())
    head.min_interval = 0.0
    head.latest(keys.signing_key().private_key, DEFAULT_ISSUER)


async def drive_floor(url: str, keys_dir: str, warm: int, count: int) -> int:
    """``warm + count`` handoffs of the governed floor (:mod:`bench.floor_governed`) to the
    member floor at ``url``, one at a time; raises unless each was accepted."""
    from agent_cards.keys import load_key_set
    from bench.floor_governed import GovernedFloor, Refused

    with tempfile.TemporaryDirectory(prefix="bench-handoff-instructions-") as root:
        floor = GovernedFloor(url, load_key_set(keys_dir), Path(root))
        connection = floor.connection()
        for index in range(warm + count):
            _freeze_after_warm_up(index, warm)
            try:
                await floor.handoff(connection)
            except Refused as exc:
                raise RuntimeError(f"floor handoff {index} refused: {exc}") from None
    return warm + count


async def drive_sdk_client(url: str, warm: int, count: int) -> int:
    """``warm + count`` blocking round trips of the a2a-sdk client to its server at
    ``url``, one at a time; raises unless each task completed."""
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    from bench.tokens import risk_payload

    text = json.dumps(risk_payload())
    async with httpx.AsyncClient(trust_env=False, timeout=60) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        client = await create_client(url, client_config=config)
        for index in range(warm + count):
            _freeze_after_warm_up(index, warm)
            request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
            states = [
                event.task.status.state
                async for event in client.send_message(request)
                if event.WhichOneof("payload") == "task"
            ]
            if TaskState.TASK_STATE_COMPLETED not in states:
                raise RuntimeError(f"round trip {index} did not complete: {states}")
        await client.close()
    return warm + count


def _freeze_after_warm_up(index: int, warm: int) -> None:
    """At the first measured request, the collector's long-lived objects are frozen (see
    :mod:`bench.send_instructions`)."""
    if index == warm:
        gc.collect()
        gc.freeze()


def serve(kind: str, url: str, warm: int, count: int, keys_dir: str) -> None:
    """The measured process: ``kind``'s requests, on the coordinator's event loop."""
    from coordinator import loop

    if kind == COORDINATOR:
        loop.run(drive_coordinator(url, keys_dir, warm, count))
    elif kind == FLOOR:
        loop.run(drive_floor(url, keys_dir, warm, count))
    else:
        loop.run(drive_sdk_client(url, warm, count))


def per_handoff(
    root: Path, checkout: Path, kind: str, url: str, keys_dir: str, counts: Sequence[int]
) -> dict[str, Any]:
    """Instructions of one request of ``kind`` as ``checkout`` makes it (the measured
    process runs this file with ``checkout``'s code, which may predate its tools)."""
    from bench.send_instructions import callgrind, per_request

    warm, small, large = counts
    root.mkdir(parents=True)
    runs = {}
    for count in (small, large):
        harness = [sys.executable, __file__, "serve", kind, url, str(warm), str(count), keys_dir]
        runs[count] = callgrind(harness, checkout, root / f"callgrind.{count}.out")
    return per_request(runs)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:  # serve KIND URL WARM COUNT KEYS_DIR
        kind, url, warm, count, keys_dir = arguments[1:6]
        serve(kind, url, int(warm), int(count), keys_dir)
        return
    from bench.send_instructions import counting_parser

    parser = counting_parser(__doc__, (30, 30, 130))
    parser.add_argument(
        "--floor", action="store_true", help="count the governed floor against the member floor"
    )
    args = parser.parse_args(arguments)
    with tempfile.TemporaryDirectory(prefix="bench-handoff-instructions-") as tmp:
        print(json.dumps(measure(Path(tmp), args)))


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from bench import services

    issuer = services.Issuer.create(root)
    keys = str(issuer.keys_dir)
    counts = (args.warm, args.small, args.large)
    with ExitStack() as stack:
        remote = stack.enter_context(services.remote_risk(root, issuer, capacity=100_000))
        port = procs.free_port()
        sdk = procs.python("bench.baselines", "sdk", "--port", str(port))
        stack.enter_context(procs.server(sdk, port, log=root / "sdk.log"))
        measured = {SDK_CLIENT: (procs.REPO, SDK_CLIENT, f"http://{procs.HOST}:{port}")}
        measured["this checkout"] = (procs.REPO, COORDINATOR, remote.url)
        for name, checkout in (also.split("=", 1) for also in args.also):
            measured[name] = (Path(checkout).resolve(), COORDINATOR, remote.url)
        if args.floor:
            floor = stack.enter_context(services.floor(root, issuer))
            measured[FLOOR] = (procs.REPO, FLOOR, floor.url)
        workers = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
        with workers as pool:
            futures = {
                name: pool.submit(per_handoff, root / str(n), *how, keys, counts)
                for n, (name, how) in enumerate(measured.items())
            }
            found = {name: future.result() for name, future in futures.items()}
    client = found[SDK_CLIENT]["instructions_m"]
    for figures in found.values():
        figures["sdk_client_over"] = round(client / figures["instructions_m"], 2)
    return found


if __name__ == "__main__":
    main()
