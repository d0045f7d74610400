"""A log line's redaction skips a pattern only when the line cannot hold what it matches
(issue 34), and its escaping is one pass over the whole line: whatever the line, what is
written is exactly what every pattern, and the escape of each part, gives."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_cards.telemetry import logs

LINES = {
    "access": "2026-12-05T10:00:00.000Z INFO remote_risk.access: POST /a2a/jsonrpc 200 1.2ms",
    "bearer": "Authorization: Bearer abc.def-ghi",
    "basic-upper": "header BASIC dXNlcjpwYXNz and more",
    "bearer-mixed": "BeArEr\ttok~en/+=",
    "scheme-alone": "a bearer, no token",
    "long-s": "Ba\u017fic dXNlcjpwYXNz",
    "dotless-i": "bas\u0131c dXNlcjpwYXNz",
    "jwt": "grant eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln rest",
    "jwt-in-scheme": "eyJaaaa.bbbb.basic xyz12345",
    "url-password": "postgresql://user:s3cret@db:5432/x",
    "url-no-password": "https://example.test/path@x",
    "at-without-url": "user:pw@host",
    "all": "Bearer x eyJaaaa.bbbb.cccc postgresql://u:p@h \u00fcnicode",
}


def _full(line: str) -> str:
    """Every pattern, unconditionally (what redaction did before its pre-checks)."""
    for pattern in logs._PATTERNS:
        line = pattern.sub(logs._keep_scheme, line)
    return line


@pytest.mark.parametrize("name", sorted(LINES))
def test_a_line_is_redacted_as_every_pattern_redacts_it(name: str) -> None:
    assert logs.Redactor()(LINES[name]) == _full(LINES[name])


def test_registered_secrets_go_first_longest_first() -> None:
    redactor = logs.Redactor()
    redactor.add("secret-value")
    redactor.add("secret-value-longer")
    assert redactor("a secret-value-longer b") == "a [redacted] b"
    assert redactor("a secret-value b") == "a [redacted] b"


def _record(message: str, fields: dict[str, Any]) -> logging.LogRecord:
    record = logging.LogRecord("svc.access", logging.INFO, __file__, 1, message, (), None)
    record.fields = fields
    return record


def test_a_text_line_escapes_as_each_part_escaped_would() -> None:
    fields: dict[str, Any] = {
        "path": "/x\r\nINFO forged\x1b[31m",
        "status": 200,
        "client\u2028": "1.2.3.4:5",
        "none": None,
    }
    record = _record("POST /x\r\n\x85 done", fields)
    line = logs.TextFormatter().format(record)
    parts = [logs.timestamp(record), "INFO", "svc.access:", logs.escaped(record.getMessage())]
    parts += [
        f"{logs.escaped(k)}={logs.escaped(str(v))}" for k, v in fields.items() if v is not None
    ]
    assert line == " ".join(parts)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
