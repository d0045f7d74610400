"""Real service processes for fault tests: remote_risk started, SIGKILLed and restarted.

:class:`RemoteRiskProcess` runs ``python -m remote_risk`` on a fixed loopback port with a
data directory (or a database URL) that outlives the process, trusting a coordinator's
published JWK Set; :func:`federation` runs the coordinator's CLI on a data directory.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_cards.keys import KeySet, load_or_create
from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from member_kit.trust.issuers import TRUST_ENV_VAR
from tests.servers import free_port

# remote_risk answers with our Finding contract; the operator says so.
DECLARED = {RISK_SKILL: finding_contract(source="registration")}
# An input remote_risk's skill accepts (a brief and its policy note).
PAYLOAD = {
    "brief": {"id": "brief-001", "uses_real_conversations": False},
    "policy_note": {
        "id": "risk-policy-007",
        "refund_execution_permitted": False,
        "real_conversations_require_privacy_review": True,
    },
}
LISTENING = re.compile(r"remote_risk listening on (http://127\.0\.0\.1:\d+)")


class RemoteRiskProcess:
    """``python -m remote_risk`` on one port and one database, restartable."""

    def __init__(
        self,
        data_dir: Path,
        trusted_jwks: Path | str,
        *extra: str,
        port: int | None = None,
        database_url: str | None = None,
        public_base_url: str | None = None,
        log: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log = log  # where its standard error goes (appended to; by default nowhere)
        self.port = port or free_port()
        self.listening_url = f"http://127.0.0.1:{self.port}"
        self.base_url = public_base_url or self.listening_url
        self.keys: KeySet = load_or_create(data_dir / "keys")
        self._args = [
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(data_dir),
            "--trust-issuer",
            f"{DEFAULT_ISSUER}={trusted_jwks}",
            *(["--database-url", database_url] if database_url else []),
            *(["--public-base-url", public_base_url] if public_base_url else []),
            *extra,
        ]
        self.process: subprocess.Popen[str] | None = None
        self.starts = 0

    def start(self) -> None:
        environ = {k: v for k, v in os.environ.items() if k != TRUST_ENV_VAR}
        with open(self.log or os.devnull, "a") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "remote_risk", *self._args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=environ,
            )
        assert process.stdout is not None
        first_line = process.stdout.readline().strip()
        match = LISTENING.fullmatch(first_line)
        if match is None:
            process.kill()
            process.wait(timeout=10)
            raise AssertionError(f"remote_risk did not start: {first_line!r}")
        assert match.group(1) == self.listening_url
        self.process = process
        self.starts += 1

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, whatever was in memory is gone."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._close()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        assert self.process is not None
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def allowed_origins(self) -> list[str]:
        """The gRPC port, when served: an origin of its own the operator allows."""
        if "--grpc-port" not in self._args:
            return []
        return [f"127.0.0.1:{self._args[self._args.index('--grpc-port') + 1]}"]

    def register_with(self, coordinator_data: DataDir) -> None:
        """Register this service in the coordinator's data directory, its key pinned (and
        its gRPC origin allowed, when it serves one)."""

        async def register() -> None:
            anchor = TrustAnchor(keys=self.keys.trusted_keys())
            async with A2AClient() as client:
                await Registry(coordinator_data).register(
                    client,
                    self.base_url,
                    anchor=anchor,
                    return_contracts=DECLARED,
                    allow_origins=self.allowed_origins(),
                )

        asyncio.run(register())


class Balancer:
    """A loopback TCP forwarder in front of replicas, as a load balancer would be: each
    connection goes to the first backend that accepts it."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> Balancer:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self._server = started.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for port in self.backends:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            await asyncio.gather(
                _pipe(reader, upstream_writer),
                _pipe(upstream_reader, writer),
                return_exceptions=True,
            )
            return
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


@contextmanager
def registered(
    root: Path, *extra: str, database_url: str | None = None, log: Path | None = None
) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    """A coordinator data directory under ``root`` with a running remote_risk registered
    in it (its card key pinned, trusting the coordinator's keys); stopped afterwards.
    ``extra``, ``database_url`` and ``log`` are :class:`RemoteRiskProcess`'s."""
    data = DataDir(root / "coordinator")
    coordinator_keys(data)
    process = RemoteRiskProcess(
        root / "remote", data.path("jwks.json"), *extra, database_url=database_url, log=log
    )
    process.start()
    try:
        process.register_with(data)
        yield data, process
    finally:
        process.stop()


def federation(data: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """The coordinator's CLI on ``data``, stdout and stderr piped."""
    environment = {**os.environ, "FEDERATION_DATA_DIR": str(data), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "coordinator", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def wait_for(condition: object, timeout: float, what: str) -> None:
    """Poll ``condition()`` until it is true; fail after ``timeout`` seconds."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
