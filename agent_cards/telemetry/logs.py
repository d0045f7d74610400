"""The one logging set-up of the process: stdlib ``logging``, text or JSON lines on stderr.

The standard library rather than structlog: uvicorn, SQLAlchemy, httpx and our own modules
all log through ``logging`` already, so one formatter on the root handler gives every line
the same shape, with no second logging system to bridge. Each line has an ISO 8601 UTC
timestamp (milliseconds, ``Z``), the level, the logger and the message; JSON lines also
carry a record's structured fields (the access log's). Every line passes the
:class:`Redactor` on its way out: bearer credentials, anything shaped like a JWT, and each
secret value registered with :func:`add_secret` (the operator token, model API keys) are
replaced by ``[redacted]``. stdout is left to the program (the servers' first line).

Every value a line shows may have been received (a request path, a header, a remote's
error text), so none of it can end the line or drive a terminal: :func:`escaped` writes
each control character (CR, LF, ESC and the rest of C0 and C1, DEL, and the Unicode
line and paragraph separators) as an escape (``\\r``, ``\\n``, ``\\x1b``), in the
message and in every field; a traceback's lines are escaped one by one and indented, so
no continuation line can pass for a record. JSON lines escape the same characters.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
DEFAULT_LEVEL = "info"
DEFAULT_FORMAT = "text"
CHATTY_LIBRARIES = ("alembic", "httpx", "httpcore")
REDACTED = "[redacted]"
# Fields a record may carry as ``extra`` that a line shows (the access log's).
FIELDS_ATTRIBUTE = "fields"
_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    # the password in a URL's userinfo (a database URL)
    re.compile(r"(?<=://)([^/\s:@]+):[^/\s@]+(?=@)"),
)


def _may_name_scheme(line: str) -> bool:
    """Whether the first pattern could match: an ASCII line without ``bearer`` or
    ``basic`` in any case cannot (a non-ASCII one always runs the pattern, whose
    case-insensitive match also takes letters such as the long s)."""
    if not line.isascii():
        return True
    lowered = line.lower()
    return "bearer" in lowered or "basic" in lowered


# Each pattern with a test that is true whenever it could match (a substring it needs),
# so that a line holding none of them skips it: the line redacted is the same.
_PATTERNS_WITH_PRECHECKS = (
    (_PATTERNS[0], _may_name_scheme),
    (_PATTERNS[1], lambda line: "eyJ" in line),
    (_PATTERNS[2], lambda line: "://" in line and "@" in line),
)

# What could end a line, start a terminal escape sequence or hide text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# What json.dumps(ensure_ascii=False) leaves unescaped of those.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")
_SHORT_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}
# Environment variables whose values are secrets by their name.
SECRET_NAME_ENDINGS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")
_MIN_SECRET_LENGTH = 8


class Redactor:
    """Replaces credentials and registered secrets in a line."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._longest_first: tuple[str, ...] = ()

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= _MIN_SECRET_LENGTH:
            self._secrets.add(secret)
            self._longest_first = tuple(sorted(self._secrets, key=len, reverse=True))

    def __call__(self, line: str) -> str:
        for secret in self._longest_first:
            line = line.replace(secret, REDACTED)
        for pattern, may_match in _PATTERNS_WITH_PRECHECKS:
            if may_match(line):
                line = pattern.sub(_keep_scheme, line)
        return line


def _keep_scheme(match: re.Match[str]) -> str:
    """Keep the scheme (``Bearer``) or the URL's user name, redact the rest."""
    kept = match.group(1) if match.re.groups else None
    if kept is None:
        return REDACTED
    separator = ":" if match.group(0).startswith(kept + ":") else " "
    return f"{kept}{separator}{REDACTED}"


REDACTOR = Redactor()


def escaped(text: str) -> str:
    """``text`` on one line, every unsafe character (see the module docstring) shown as
    an escape rather than obeyed."""
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _continuation(text: str) -> str:
    """A traceback under its record: each line escaped and indented."""
    return "".join("\n  " + escaped(line) for line in text.splitlines())


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
        parts += [f"{key!s}={value!s}" for key, value in fields_of(record).items()]
        # one escape of the whole line: escaping is character by character and the
        # separators (space, colon, equals) are safe, so this is each part escaped
        line = escaped(" ".join(parts))
        if record.exc_info:
            line += _continuation(self.formatException(record.exc_info))
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
        line = json.dumps(document, default=str, ensure_ascii=False)
        return REDACTOR(_JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", line))


class _Handler(logging.StreamHandler):
    """The set-up's own handler, so that setting up again replaces it. Without a stream of
    its own it writes to whatever ``sys.stderr`` is when a record is emitted (a host that
    swaps stderr, as pytest's capture does, never leaves it writing to a closed file)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream or sys.stderr)
        self._follows_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self._follows_stderr:
            self.stream = sys.stderr
        super().emit(record)


def setup(
    level: str = DEFAULT_LEVEL, fmt: str = DEFAULT_FORMAT, stream: IO[str] | None = None
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) as ``fmt``."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    if fmt.lower() not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    _record_only_what_lines_show()
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(stream)
    handler.setFormatter(JSONFormatter() if fmt.lower() == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Libraries that narrate routine work at INFO (each migration step, each request) speak
    # only at WARNING unless debugging.
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel("DEBUG" if level.lower() == "debug" else "WARNING")


def _record_only_what_lines_show() -> None:
    """A line shows a record's time, level, logger, message and fields, never where it
    was logged from nor its thread or process: so none of those is looked up for each
    record (the logging HOWTO's "Optimization": no frame walk, no thread name, no process
    id or name). Every request's access line is a record."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def reset() -> None:
    """Remove this set-up's handler again (a library host, or a test, that set it up)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)


def add_arguments(parser: argparse.ArgumentParser, env_prefix: str) -> None:
    """``--log-level`` and ``--log-format`` (defaults from ``{env_prefix}LOG_*``)."""
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        help=f"least severe level logged (env {env_prefix}LOG_LEVEL, default {DEFAULT_LEVEL})",
    )
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        help=f"text or JSON lines on stderr (env {env_prefix}LOG_FORMAT, default {DEFAULT_FORMAT})",
    )


def setup_from(args: argparse.Namespace, env: Mapping[str, str], env_prefix: str) -> None:
    """:func:`setup` from the parsed flags, else the environment; every environment value
    whose name says it is a secret (``*_API_KEY``, ``*_TOKEN``, ...) is redacted."""
    for name, value in env.items():
        if name.upper().endswith(SECRET_NAME_ENDINGS):
            add_secret(value)
    level = getattr(args, "log_level", None) or env.get(f"{env_prefix}LOG_LEVEL") or DEFAULT_LEVEL
    fmt = getattr(args, "log_format", None) or env.get(f"{env_prefix}LOG_FORMAT") or DEFAULT_FORMAT
    setup(level.lower(), fmt.lower())


def adopt_uvicorn() -> None:
    """Route uvicorn's own loggers through this set-up (uvicorn installs its handlers when
    its ``Config`` is made); its access log stays off, the middleware writes ours."""
    root = logging.getLogger()
    if not any(isinstance(handler, _Handler) for handler in root.handlers):
        setup()
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True


@dataclass(frozen=True)
class ServiceLogs:
    """A service's logging set-up: the shared one under the service's environment
    prefix (``{env_prefix}LOG_LEVEL`` and ``{env_prefix}LOG_FORMAT``)."""

    env_prefix: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser, self.env_prefix)

    def setup_from(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        setup_from(args, env, self.env_prefix)
