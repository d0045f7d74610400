"""A small HTTP/1.1 keep-alive client on asyncio streams, for the JSON-RPC requests.

A handoff to a skill that answers at once is one blocking ``SendMessage``: one POST on a
kept-alive connection. Through httpx that POST costs more in request building, cookie
handling and its pool's layers than the exchange itself, so :class:`A2AClient` sends its
plain JSON-RPC requests here when it made its own HTTP client (one a caller passed, an
in-memory app say, is always used as given). Streams, cards and every other request stay
on httpx.

What it keeps of httpx's behaviour: a bounded pool of idle connections per origin (all
of them together at most ``max_connections``), the connect and read timeouts, no
redirects, no proxy (the httpx client ignores the environment's too), the same TLS
verification (httpx's default context: certifi's CAs, ``http/1.1`` by ALPN), header
names and values checked before anything is sent, and the same exception types for the
same failures (httpx's own; :func:`coordinator.errors.translated` turns them into the
same errors and reasons). An idle connection the server closed is noticed before
anything is written on it and is dropped for another (or a new one); once any byte of a
request went out it is never sent again, as POST is not idempotent, and a failure
surfaces as it does through httpx. The answer is read by :mod:`coordinator.remote.http.http1`.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from agent_cards import tls
from coordinator.remote.http import http1

# Headers this client writes itself: a caller who sets one is served by httpx instead.
OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e]*")
_URL = re.compile(r"https?://[\x21-\x7e]+")
# Parsed endpoints kept (one per remote interface the client talks to).
MAX_TARGETS = 1024


@dataclass(frozen=True)
class Target:
    """Where a URL's request goes: its origin, its ``Host`` header and its path."""

    origin: tuple[str, str, int]
    host_header: bytes
    path: bytes

    @property
    def tls(self) -> bool:
        return self.origin[0] == "https"


def target_of(url: str) -> Target | None:
    """The target of a plain ``http(s)`` URL; None for anything httpx should handle
    (user info, a non-ASCII host, an unusual port: httpx refuses or encodes those)."""
    if _URL.fullmatch(url) is None:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = parts.hostname
    if not host or "@" in parts.netloc:
        return None
    default = port == (443 if parts.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if default else f"{shown}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target((parts.scheme, host, port), host_header.encode(), path.encode())


def tls_context() -> ssl.SSLContext:
    """The TLS context the httpx client uses: httpx's default verification, no settings
    from the environment, HTTP/1.1 offered by ALPN."""
    context = tls.verified()
    context.set_alpn_protocols(["http/1.1"])  # as httpcore sets it on each connection
    return context


def request_bytes(method: str, target: Target, headers: Mapping[str, str], body: bytes) -> bytes:
    """The request on the wire; a header name or value that could split it is refused."""
    lines = [b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (method.encode(), target.path, target.host_header)]
    for name, value in headers.items():
        if _NAME.fullmatch(name) is None or _VALUE.fullmatch(value) is None:
            raise httpx.LocalProtocolError(f"illegal header {name!r}")
        lines.append(b"%s: %s\r\n" % (name.encode("ascii"), value.encode("ascii")))
    lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
    lines.append(body)
    return b"".join(lines)


async def _send(writer: asyncio.StreamWriter, message: bytes, timeout: float) -> None:
    """Write the request, within the write timeout (httpx's is its read timeout too). A
    request the transport took whole leaves ``drain`` nothing to wait for (it waits only
    while writing is paused, over a full buffer), so no timer is set for it."""
    try:
        writer.write(message)
        if writer.transport.get_write_buffer_size() == 0:
            await writer.drain()
            return
        async with asyncio.timeout(timeout):
            await writer.drain()
    except TimeoutError:
        raise httpx.WriteTimeout("timed out sending the request") from None
    except OSError as exc:
        raise httpx.WriteError(str(exc) or type(exc).__name__) from None


class Connection:
    """One open connection to one origin."""

    __slots__ = ("origin", "reader", "writer")

    def __init__(
        self,
        origin: tuple[str, str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        """Still open at both ends with nothing unread: the server neither closed it while
        it was idle nor sent anything unasked (a ``408`` before closing, say), which would
        otherwise be read as the next request's answer. (The reader's buffer has no
        public accessor; httpx's pool drops an idle connection that is readable too.)"""
        unread = getattr(self.reader, "_buffer", None)
        return not (self.writer.is_closing() or self.reader.at_eof() or unread)

    def close(self) -> None:
        self.writer.transport.abort()


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class KeepAlivePool:
    """Kept-alive connections per origin, at most ``max_connections`` open in all."""

    def __init__(
        self,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
        max_response_bytes: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``tls``: the context https connections verify with (by default httpx's)."""
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.max_response_bytes = max_response_bytes
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._open = 0
        self._closed = False
        self._targets: dict[str, Target | None] = {}
        self._tls = tls
        self.requests = 0  # requests written by this pool: what a test can see it served

    def target(self, url: str, headers: Mapping[str, str]) -> Target | None:
        """Where this pool would send ``url``; None when httpx should serve the request."""
        if any(name.lower() in OWN_HEADERS for name in headers):
            return None
        if url not in self._targets:
            if len(self._targets) >= MAX_TARGETS:
                self._targets.clear()
            self._targets[url] = target_of(url)
        return self._targets[url]

    def idle(self, url: str) -> int:
        """Idle connections kept for ``url``'s origin that are still usable."""
        target = target_of(url)
        if target is None:
            return 0
        kept = self._idle.get(target.origin, [])
        for connection in [c for c in kept if not c.usable()]:
            kept.remove(connection)
            self._drop(connection)
        return len(kept)

    async def request(
        self, target: Target, method: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """One request and its answer, on an idle connection that is still open or on a
        new one; nothing is ever written twice."""
        message = request_bytes(method, target, headers, body)
        connection = self._take(target.origin) or await self._connect(target)
        done = keep = False
        try:
            self.requests += 1
            await _send(connection.writer, message, self.read_timeout)
            head = await http1.read_head(connection.reader, self.read_timeout)
            reply = await self._body(connection, head)
            done, keep = True, head.keep_alive
            return reply
        finally:
            self._release(connection, done and keep)

    async def _body(self, connection: Connection, head: http1.Head) -> Reply:
        """The answer's body under the cap, refusing an encoding we did not ask for."""
        headers = {name.lower(): value for name, value in head.headers}
        encoding = headers.get(b"content-encoding")
        http1.refuse_encoding(None if encoding is None else encoding.decode("latin-1"))
        cap = self.max_response_bytes
        body = await http1.read_body(connection.reader, head, cap, self.read_timeout)
        return Reply(head.status, head.headers, body)

    def _take(self, origin: tuple[str, str, int]) -> Connection | None:
        """The most recently used idle connection to ``origin`` still open; the ones the
        server closed meanwhile are dropped (nothing was sent on them)."""
        kept = self._idle.get(origin)
        while kept:
            connection = kept.pop()
            if connection.usable():
                return connection
            self._drop(connection)
        return None

    async def _connect(self, target: Target) -> Connection:
        if self._open >= self.max_connections:
            self._evict()
        _, host, port = target.origin
        if target.tls and self._tls is None:
            self._tls = tls_context()
        tls = self._tls if target.tls else None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls else None,
                    limit=http1.MAX_HEAD_BYTES,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
        self._open += 1
        return Connection(target.origin, reader, writer)

    def _evict(self) -> None:
        """Close the idle connection of any origin that waited longest."""
        for origin, kept in self._idle.items():
            if kept:
                self._drop(kept.pop(0))
                if not kept:
                    del self._idle[origin]
                return

    def _release(self, connection: Connection, keep: bool) -> None:
        if keep and not self._closed and connection.usable():
            self._idle.setdefault(connection.origin, []).append(connection)
        else:
            self._drop(connection)

    def _drop(self, connection: Connection) -> None:
        connection.close()
        self._open -= 1

    async def aclose(self) -> None:
        """Close every idle connection; ones in use close when their request ends."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for kept in idle.values():
            for connection in kept:
                self._drop(connection)
