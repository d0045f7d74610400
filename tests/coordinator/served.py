"""``federation serve coordinator`` as a real process on a free loopback port, its stderr
(every log line) written to a file the test reads afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

TOKEN = "operator-token-for-tests-0123456789abcdef"


@dataclass
class Served:
    url: str
    log: Path

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()


@contextmanager
def served(root: Path, **env: str) -> Iterator[Served]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FEDERATION_")}
    environment = {
        **inherited,
        "FEDERATION_DATA_DIR": str(root / "data"),
        "FEDERATION_OPERATOR_TOKEN": TOKEN,
        **env,
    }
    log = root / "coordinator.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "serve", "coordinator", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=environment,
        )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("coordinator listening on http://"), log.read_text()
        yield Served(first.rsplit(" ", 1)[1], log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
