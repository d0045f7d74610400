"""Processes of a bench run: servers pinned to one core, load to the other, on loopback.

Every server is started as ``python -m ...`` under ``taskset -c 0`` (when ``taskset``
exists) and waited for until its port accepts connections; every load generator runs
under ``taskset -c 1`` and prints one JSON document on its last line of stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SERVER_CORE = "0"
LOAD_CORE = "1"
HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parent.parent


def pinned(command: Sequence[str], core: str) -> list[str]:
    """``command`` under ``taskset -c core`` when that exists and the machine has two cores."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > int(core):
        return ["taskset", "-c", core, *command]
    return list(command)


def python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def cpu_times() -> tuple[int, int]:
    """``(busy, total)`` clock ticks of the whole machine so far (``/proc/stat``; zeros
    where there is none): two readings give the share of the cores that was busy."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = sum(ticks[3:5])  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How many of the machine's cores were busy on average between two readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total * (os.cpu_count() or 1) if total else 0.0


def cpu_seconds(pids: Sequence[int]) -> float:
    """User plus system CPU time the processes ``pids`` have used so far (every thread)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


class ServerCPU:
    """The CPU a server process (``pid``; None: not measured) spends over a window."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._start = 0.0

    def start(self) -> None:
        if self.pid is not None:
            self._start = cpu_seconds((self.pid,))

    def ms_per(self, count: int) -> float | None:
        """CPU milliseconds per completed request since :meth:`start`."""
        if self.pid is None or not count:
            return None
        return (cpu_seconds((self.pid,)) - self._start) * 1000 / count


# The sockets that hold the ports this process chose, in the order they were chosen.
_HELD: dict[int, socket.socket] = {}


def free_port() -> int:
    """A loopback port held for a server this process starts, until :func:`release_ports`.

    The kernel picks a port no socket holds (a bind to port 0) and the socket stays
    bound, never listening: while it is held the port goes to no one else, neither to
    another process's bind to port 0 nor to an outgoing connection (whose own port comes
    from the same range), so it is still free when the server binds it, and a probe of
    it cannot be given it either. Our servers bind with ``SO_REUSEADDR`` (uvicorn's do),
    which on Linux binds a port whose other sockets do not listen; until one listens a
    connection to the port is refused, as on a closed one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    port = int(sock.getsockname()[1])
    _HELD[port] = sock
    return port


def held_count() -> int:
    """How many ports this process holds (:func:`free_port`)."""
    return len(_HELD)


def release_ports(since: int = 0) -> None:
    """Give up the ports chosen after the first ``since``: a server listening on one keeps
    it, and a port nothing listens on may go to anyone again. A long-lived process that
    chooses many ports (a test worker) releases them, or its file descriptors run out."""
    for port in list(_HELD)[since:]:
        _HELD.pop(port).close()


def _environment(extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra or {})}
    env.pop("PYTHONDEVMODE", None)
    return env


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before listening")
        if accepts(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start within {timeout} s")


def accepts(port: int) -> bool:
    """Whether something listens on ``port``. A port chosen by a bind to port 0 lies in
    the range the kernel takes outgoing connections' ports from, so a probe of it while
    nothing listens can be given that very port as its own and connect to itself (TCP's
    simultaneous open) when nothing holds it (:func:`free_port` does): such a connection
    is no server."""
    try:
        with socket.create_connection((HOST, port), timeout=0.2) as probe:
            return bool(probe.getsockname() != probe.getpeername())
    except OSError:
        return False


@contextmanager
def server(
    command: Sequence[str], port: int, *, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (which listens on ``port``) pinned to the server core."""
    sink = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        pinned(command, SERVER_CORE),
        stdout=subprocess.DEVNULL,
        stderr=sink,
        env=_environment(env),
        cwd=REPO,
    )
    try:
        wait_for_port(port, process)
        yield process
    finally:
        stop(process)
        if log:
            sink.close()  # type: ignore[union-attr]


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_load(
    module: str,
    *args: str,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    checkout: Path = REPO,
) -> Any:
    """Run a load generator pinned to the load core; its last stdout line is JSON.
    ``checkout``: the copy of the project it runs from (this one unless given)."""
    done = subprocess.run(
        pinned(python(module, *args), LOAD_CORE),
        capture_output=True,
        env=_environment({"PYTHONPATH": str(checkout), **(env or {})}),
        cwd=checkout,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux), 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
