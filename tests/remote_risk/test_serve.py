"""``python -m remote_risk`` runs the service as a process and announces its real URL."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx

from contracts.wire import AGENT_CARD_PATH
from remote_risk.app import JSONRPC_PATH


def test_port_zero_prints_the_real_url_first_and_serves_there() -> None:
    """With port 0 the first stdout line names the bound port, and the card there points home."""
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_risk", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line = process.stdout.readline().strip()
        match = re.fullmatch(r"remote_risk listening on (http://127\.0\.0\.1:(\d+))", first_line)
        assert match, first_line
        base_url, port = match.group(1), int(match.group(2))
        assert port > 0
        card = httpx.get(base_url + AGENT_CARD_PATH, timeout=10).json()
        assert card["supportedInterfaces"][0]["url"] == base_url + JSONRPC_PATH
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
