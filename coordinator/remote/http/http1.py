"""One HTTP/1.1 response read off a stream, every part of it bounded.

The small keep-alive client (:mod:`coordinator.remote.http.keepalive`) reads its answers here:
the head (status line and headers, at most :data:`MAX_HEAD_BYTES` and
:data:`MAX_HEADERS`), then a body framed by ``Content-Length``, by chunks, or by the
end of the connection, never more than the caller's cap. Whether the connection may be
used again is read from the head (``Connection: close``, HTTP/1.0).

A broken answer raises httpx's own exception for it (``RemoteProtocolError``,
``ReadError``, ``ReadTimeout``), so :func:`coordinator.errors.translated` gives the same
error and reason as for the same answer read by httpx; an answer over the cap raises the
:class:`~coordinator.errors.ProtocolError` the httpx path raises (``response_too_large``,
``encoding_refused``), from the same functions.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import httpx

from coordinator.errors import ProtocolError

# The head of one answer (status line and headers) and how many headers it may have.
MAX_HEAD_BYTES = 100 * 1024  # as httpx's HTTP/1.1 parser allows
MAX_HEADERS = 100
# Statuses whose answer never has a body (RFC 9110 6.4.1).
_NO_BODY = (204, 304)
_STATUS = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9]{2})(?: [\t\x20-\x7e\x80-\xff]*)?")
_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[\t\x20-\x7e\x80-\xff]*)?")
_READ = 64 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class Head:
    """The status line and headers of one answer, and how its body is framed."""

    status: int
    headers: list[tuple[bytes, bytes]]
    keep_alive: bool
    length: int | None
    chunked: bool


def refuse_encoding(value: str | None) -> None:
    """An answer in a content-encoding we did not ask for is refused."""
    encoding = (value or "identity").lower()
    if encoding not in ("identity", ""):
        raise ProtocolError(f"response uses content-encoding {encoding!r}", "encoding_refused")


def refuse_declared(declared: str | None, cap: int) -> None:
    """An answer that declares more bytes than the cap is refused before it is read."""
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise ProtocolError(f"response of {declared} bytes exceeds {cap}", "response_too_large")


def refuse_over(size: int, cap: int) -> None:
    """An answer that grows past the cap while it is read is refused."""
    if size > cap:
        raise ProtocolError(f"response exceeds {cap} bytes", "response_too_large")


def broken(why: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(why)


async def within(timeout: float | None, step: Awaitable[T]) -> T:
    """One read of the answer, within the read timeout; a reset is a read error.
    ``timeout`` None: a read of what is buffered already, which cannot wait (no timer)."""
    try:
        if timeout is None:
            return await step
        async with asyncio.timeout(timeout):
            return await step
    except TimeoutError:
        raise httpx.ReadTimeout("timed out reading the answer") from None
    except asyncio.IncompleteReadError:
        raise broken("peer closed connection without sending complete message") from None
    except asyncio.LimitOverrunError:
        raise broken("answer head or chunk line too long") from None
    except OSError as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__) from None


async def read_head(reader: asyncio.StreamReader, timeout: float) -> Head:
    """The head of the next final answer (informational ones are skipped)."""
    while True:
        raw = await within(timeout, _head_bytes(reader))
        head = parse_head(raw)
        if not 100 <= head.status < 200:
            return head
        if head.status == 101:
            raise broken("server switched protocols unasked")


async def _head_bytes(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise broken("Server disconnected without sending a response.") from None
        raise


def parse_head(raw: bytes) -> Head:
    """Status line and headers, strictly: anything malformed is a protocol error."""
    if len(raw) > MAX_HEAD_BYTES:
        raise broken("answer head too long")
    lines = raw[:-4].split(b"\r\n")
    status = _STATUS.fullmatch(lines[0])
    if status is None:
        raise broken("malformed status line")
    if len(lines) - 1 > MAX_HEADERS:
        raise broken(f"more than {MAX_HEADERS} headers")
    headers = [_header(line) for line in lines[1:]]
    return _framed(int(status.group(2)), status.group(1) == b"1", headers)


def _header(line: bytes) -> tuple[bytes, bytes]:
    name, colon, value = line.partition(b":")
    value = value.strip(b" \t")
    if not colon or _NAME.fullmatch(name) is None or _VALUE.fullmatch(value) is None:
        raise broken("malformed header line")
    return name, value


def _framed(status: int, http11: bool, headers: list[tuple[bytes, bytes]]) -> Head:
    """How the body is delimited and whether the connection stays open after it."""
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    tokens: set[bytes] = set()
    for name, value in headers:
        key = name.lower()
        if key == b"content-length":
            lengths.update(part.strip() for part in value.split(b","))
        elif key == b"transfer-encoding":
            codings.extend(part.strip().lower() for part in value.split(b","))
        elif key == b"connection":
            tokens.update(part.strip().lower() for part in value.split(b","))
    if len(lengths) > 1 or any(not part.isdigit() for part in lengths):
        raise broken("malformed Content-Length")
    if codings and (codings != [b"chunked"] or lengths):
        raise broken("unsupported Transfer-Encoding")
    keep = b"close" not in tokens and (http11 or b"keep-alive" in tokens)
    length = int(lengths.pop()) if lengths else None
    if status in _NO_BODY or status < 200:
        length = 0
    chunked = bool(codings) and length != 0
    return Head(status, headers, keep and (chunked or length is not None), length, chunked)


async def read_body(reader: asyncio.StreamReader, head: Head, cap: int, timeout: float) -> bytes:
    """The body as the head frames it, never more than ``cap`` bytes."""
    if head.chunked:
        return await _chunked(reader, cap, timeout)
    if head.length is not None:
        refuse_declared(str(head.length), cap)
        if not head.length:
            return b""
        buffered = head.length <= _buffered(reader)  # arrived with the head, say
        return await within(None if buffered else timeout, reader.readexactly(head.length))
    return await _until_closed(reader, cap, timeout)


def _buffered(reader: asyncio.StreamReader) -> int:
    """How many bytes ``reader`` holds unread (0 if it does not say: a timer is set)."""
    return len(getattr(reader, "_buffer", b""))


async def _chunked(reader: asyncio.StreamReader, cap: int, timeout: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = await within(timeout, reader.readuntil(b"\r\n"))
        match = _CHUNK_SIZE.fullmatch(line[:-2])
        if match is None:
            raise broken("malformed chunk size")
        length = int(match.group(1), 16)
        if length == 0:
            await _trailers(reader, timeout)
            return b"".join(parts)
        size += length
        refuse_over(size, cap)
        chunk = await within(timeout, reader.readexactly(length + 2))
        if chunk[-2:] != b"\r\n":
            raise broken("malformed chunk end")
        parts.append(chunk[:-2])


async def _trailers(reader: asyncio.StreamReader, timeout: float) -> None:
    for _ in range(MAX_HEADERS + 1):
        if await within(timeout, reader.readuntil(b"\r\n")) == b"\r\n":
            return
    raise broken(f"more than {MAX_HEADERS} trailers")


async def _until_closed(reader: asyncio.StreamReader, cap: int, timeout: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    while chunk := await within(timeout, reader.read(_READ)):
        size += len(chunk)
        refuse_over(size, cap)
        parts.append(chunk)
    return b"".join(parts)
