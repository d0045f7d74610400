"""A received value cannot forge a log line or drive the operator's terminal.

A request path carrying CR, LF and an ANSI escape (percent-encoded, as any client may
send it; the server decodes it into the path it logs) used to be written raw: the access
log line split in two, the second one a record of the attacker's choosing, and the
terminal showing it obeyed the escape sequence. Against a real coordinator process it is
now one line with the characters escaped.
"""

from __future__ import annotations

import io
import json
import logging
import socket
from pathlib import Path

import pytest

from agent_cards.telemetry import logs
from tests.coordinator.served import served
from tests.edge_clients import address, read_response

FORGED = "2026-01-01T00:00:00.000Z INFO coordinator.service.http.api: operator logged in"
PATH = "/v1/runs%0d%0a" + FORGED.replace(" ", "%20") + "%1b[31mowned%1b[0m%e2%80%a8tail"


def _get(url: str, path: str) -> bytes:
    with socket.create_connection(address(url), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return read_response(sock)


def test_a_request_path_cannot_forge_an_access_log_line(tmp_path: Path) -> None:
    with served(tmp_path) as coordinator:
        answer = _get(coordinator.url, PATH)
        assert answer.startswith(b"HTTP/1.1 404")  # no such path: answered, and logged escaped
    lines = [line for line in coordinator.lines() if "owned" in line or "logged in" in line]
    assert len(lines) == 1, lines
    (line,) = lines
    assert "\\r\\n" + FORGED in line and "\\x1b[31mowned\\x1b[0m" in line
    assert "\\u2028tail" in line
    text = coordinator.log.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\r" not in text and "\u2028" not in text


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_field_and_message_is_escaped(fmt: str) -> None:
    stream = io.StringIO()
    logs.setup("info", fmt, stream)
    try:
        value = "a\r\nb\x1b[2J\x9b\u2029c\x00"
        logging.getLogger("test.escape").info(
            "message %s", value, extra={"fields": {"path": value}}
        )
        try:
            raise ValueError("boom\n" + FORGED)
        except ValueError:
            logging.getLogger("test.escape").exception("failed")
    finally:
        logs.reset()
    written = stream.getvalue()
    for char in ("\r", "\x1b", "\x9b", "\u2029", "\x00"):
        assert char not in written
    records = written.splitlines()
    assert not any(line.startswith(FORGED) for line in records)
    if fmt == "json":
        first = json.loads(records[0])
        assert first["path"] == value and first["message"] == "message " + value
    else:
        assert records[0].endswith("path=a\\r\\nb\\x1b[2J\\x9b\\u2029c\\x00")
