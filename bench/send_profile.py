"""Where a member's blocking send goes: remote_risk beside the member floor (bench.floor).

Three readings, each from the running server, one request at a time on one keep-alive
connection (the sends of :mod:`bench.remote_cpu`):

- **CPU per send, user and kernel apart** (``/proc/PID/stat``), the a2a-sdk server's too:
  how much of the distance to the floor is the interpreter's and how much the kernel's;
- **calls per send**: Python function calls (built-ins included) and SQL statements
  (``execute``, ``executemany`` and ``commit``: a commit counts as one whether the driver
  or a ``COMMIT`` statement makes it), counted by ``cProfile`` in a second
  window while the server runs under :func:`serve_profiled` (started by SIGUSR1 and
  written by SIGUSR2, so start-up and warm-up are not counted). The profiler slows the
  server, so this window gives counts, never times;
- **pages a commit writes**: the server's SQLite write-ahead log read after the first
  window, frames counted between commit frames (a page a send touches is one frame, so
  every table and index a send writes costs at least one).

``python -m bench.send_profile [--requests N]`` prints one JSON line. A path built for the
send is read against the floor here: fewer Python calls, not less native work, is what
separates them (docs/benchmarks.md, "Where a send goes").
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import runpy
import signal
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from agent_cards.identity import identity_of
from bench import procs
from bench.member_overhead import Target, cpu_per_send
from bench.remote_cpu import FLOOR, OURS, SDK, prepared_sends, sdk_server, server_process, window
from bench.services import Issuer
from bench.tokens import TokenMinter
from coordinator.authority.delegator import DEFAULT_ISSUER
from member_kit.trust.issuers import signing_keys

_WAL_HEADER, _FRAME_HEADER = 32, 24
_SQL_CALLS = ("execute", "executemany", "commit")


def serve_profiled(out: Path, module: str, argv: Sequence[str]) -> None:
    """Run ``module`` as ``python -m module argv``, profiled from SIGUSR1 to SIGUSR2 (the
    statistics then written to ``out``)."""
    profile = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
    signal.signal(signal.SIGUSR2, lambda *_: _dump(profile, out))
    sys.argv = [module, *argv]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def _dump(profile: cProfile.Profile, out: Path) -> None:
    profile.disable()
    profile.dump_stats(f"{out}.part")
    os.replace(f"{out}.part", out)


def user_and_system(pid: int) -> tuple[float, float]:
    """Seconds of user and of kernel CPU the process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def calls_per_send(stats_file: Path, sends: int) -> dict[str, float]:
    """Function calls and SQL statements a send, from a profile of ``sends``."""
    stats: dict[Any, Any] = pstats.Stats(str(stats_file)).stats  # type: ignore[attr-defined]
    calls = sql = 0
    for (_file, _line, name), (_primitive, total, *_rest) in stats.items():
        calls += total
        method = name.removeprefix("<method '").split("'", 1)[0]
        if "sqlite3" in name and method in _SQL_CALLS:
            sql += total
    return {"python_calls": round(calls / sends, 1), "sql_statements": round(sql / sends, 2)}


def pages_per_commit(wal: bytes) -> float:
    """The mean number of frames (pages) of the commits a write-ahead log holds."""
    if len(wal) < _WAL_HEADER:
        return 0.0
    (page_size,) = struct.unpack(">I", wal[8:12])
    frames = commits = 0
    for offset in range(_WAL_HEADER, len(wal) - _FRAME_HEADER - page_size + 1,
                        _FRAME_HEADER + page_size):  # fmt: skip
        frames += 1
        (size_after,) = struct.unpack(">I", wal[offset + 4 : offset + 8])
        commits += size_after != 0  # a commit frame states the database's size after it
    return round(frames / commits, 1) if commits else 0.0


def _member(stack: ExitStack, root: Path, issuer: Issuer, name: str, module: str) -> Target:
    """``module`` (remote_risk or the floor) as deployed, under :func:`serve_profiled`."""
    port, data_dir = procs.free_port(), root / f"{name}-data"
    trust = f"{DEFAULT_ISSUER}={issuer.jwks_file}"
    args = ("--port", str(port), "--data-dir", str(data_dir), "--trust-issuer", trust)
    profile = str(root / f"{name}.prof")
    command = procs.python("bench.send_profile", "serve", profile, module, *args)
    pid = stack.enter_context(server_process(command, port, procs.REPO, root / f"{name}.log"))
    audience = identity_of(signing_keys(None, data_dir).signing_key().verification_key())
    return Target(f"http://{procs.HOST}:{port}", (pid,), audience)


def _profiled_window(
    client: httpx.Client, target: Target, minter: TokenMinter, sends: int, out: Path
) -> dict[str, float]:
    prepared = prepared_sends(target, minter, sends)
    (pid,) = target.pids
    os.kill(pid, signal.SIGUSR1)
    time.sleep(0.2)  # the handler runs between two of the server's own steps
    cpu_per_send(client, target, prepared)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return calls_per_send(out, sends)


def _timed_window(
    client: httpx.Client, target: Target, minter: TokenMinter, sends: int
) -> dict[str, float]:
    prepared = prepared_sends(target, minter, sends)
    (pid,) = target.pids
    user, system = user_and_system(pid)
    cpu_per_send(client, target, prepared)
    after_user, after_system = user_and_system(pid)
    return {
        "user_ms": round((after_user - user) * 1000 / sends, 3),
        "system_ms": round((after_system - system) * 1000 / sends, 3),
    }


def _wal_of(data_dir: Path) -> bytes:
    (database,) = [path for path in data_dir.glob("*.db") if path.is_file()]
    wal = database.with_name(database.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def measure(root: Path, requests: int, warmup: int) -> dict[str, Any]:
    issuer = Issuer.create(root)
    minter = TokenMinter(issuer.keys.active, "")
    found: dict[str, Any] = {"cpu_ms": {}, "per_send": {}, "pages_per_commit": {}}
    with ExitStack() as stack, httpx.Client(timeout=30) as client:
        members = {OURS: "remote_risk", FLOOR: "bench.floor"}
        targets = {name: _member(stack, root, issuer, name, module)
                   for name, module in members.items()}  # fmt: skip
        targets[SDK] = sdk_server(stack, root)
        for target in targets.values():
            window(client, target, minter, warmup)
        for name, target in targets.items():
            found["cpu_ms"][name] = _timed_window(client, target, minter, requests)
        for name in members:
            found["pages_per_commit"][name] = pages_per_commit(_wal_of(root / f"{name}-data"))
            found["per_send"][name] = _profiled_window(
                client, targets[name], minter, requests, root / f"{name}.prof"
            )
    return found


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:  # the server side: serve OUT MODULE ARGS...
        serve_profiled(Path(arguments[1]), arguments[2], arguments[3:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sends per window")
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args(arguments)
    if (os.cpu_count() or 1) > 1:  # the client on the load core
        os.sched_setaffinity(0, {int(procs.LOAD_CORE)})
    with tempfile.TemporaryDirectory(prefix="bench-send-profile-") as tmp:
        print(json.dumps(measure(Path(tmp), args.requests, args.warmup)))


if __name__ == "__main__":
    main()
