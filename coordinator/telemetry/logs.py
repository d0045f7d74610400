"""The one logging set-up of the process: stdlib ``logging``, text or JSON lines on stderr.

The standard library rather than structlog: uvicorn, SQLAlchemy, httpx and our own modules
all log through ``logging`` already, so one formatter on the root handler gives every line
the same shape, with no second logging system to bridge. Each line has an ISO 8601 UTC
timestamp (milliseconds, ``Z``), the level, the logger and the message; JSON lines also
carry a record's structured fields (the access log's). Every line passes the
:class:`Redactor` on its way out: bearer credentials, anything shaped like a JWT, and each
secret value registered with :func:`add_secret` (the operator token, model API keys) are
replaced by ``[redacted]``. stdout is left to the program (the servers' first line).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
DEFAULT_LEVEL = "info"
DEFAULT_FORMAT = "text"
REDACTED = "[redacted]"
# Fields a record may carry as ``extra`` that a line shows (the access log's).
FIELDS_ATTRIBUTE = "fields"
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
)
_MIN_SECRET_LENGTH = 8


class Redactor:
    """Replaces credentials and registered secrets in a line."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= _MIN_SECRET_LENGTH:
            self._secrets.add(secret)

    def __call__(self, line: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            line = line.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            line = pattern.sub(_keep_scheme, line)
        return line


def _keep_scheme(match: re.Match[str]) -> str:
    scheme = match.group(1) if match.re.groups else None
    return f"{scheme} {REDACTED}" if scheme else REDACTED


REDACTOR = Redactor()


def add_secret(secret: str | None) -> None:
    """Never let ``secret`` appear in a log line of this process."""
    REDACTOR.add(secret)


def timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, FIELDS_ATTRIBUTE, None)
    if not isinstance(fields, Mapping):
        return {}
    return {key: value for key, value in fields.items() if value is not None}


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [timestamp(record), record.levelname, f"{record.name}:", record.getMessage()]
        parts += [f"{key}={value}" for key, value in fields_of(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return REDACTOR(line)


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the fields."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return REDACTOR(json.dumps(document, default=str, ensure_ascii=False))


class _Handler(logging.StreamHandler):
    """The set-up's own handler, so that setting up again replaces it."""


def setup(
    level: str = DEFAULT_LEVEL, fmt: str = DEFAULT_FORMAT, stream: IO[str] | None = None
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) as ``fmt``."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt.lower() not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt.lower() == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())


def from_env(env: Mapping[str, str], prefix: str) -> tuple[str, str]:
    """``{prefix}LOG_LEVEL`` and ``{prefix}LOG_FORMAT``, with the defaults."""
    level = env.get(f"{prefix}LOG_LEVEL") or DEFAULT_LEVEL
    fmt = env.get(f"{prefix}LOG_FORMAT") or DEFAULT_FORMAT
    return level, fmt


def adopt_uvicorn() -> None:
    """Route uvicorn's own loggers through this set-up (uvicorn installs its handlers when
    its ``Config`` is made); its access log stays off, the middleware writes ours."""
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
