"""uvicorn's httptools protocol with the limits a connection needs before any app runs.

Why httptools, bounded here, and not h11 or another server: measured in ``bench/edge.py``
and summarised in the README's "Limits" section. In short, stock uvicorn bounds neither
the header bytes on httptools (a 100 MB header is buffered whole) nor the time headers
and bodies take, nor connections per client, on either parser; h11 caps the header
buffer but answers 400 and is several times slower per request. This class keeps the
httptools parser and adds, per connection:

* **header bytes**: the request line and header fields of one request are counted as the
  bytes arrive; past ``max_header_bytes`` the answer is 431 and the connection closes,
  before the rest of the header is read or parsed;
* **header time**: from the connection's start (or a keep-alive request's first byte) to
  the end of its headers, at most ``header_timeout_seconds``, else 408 and close;
* **body time**: from the end of the headers to the last body byte, at most
  ``body_timeout_seconds``, else 408 (if no response started) and close; the app sees a
  disconnect;
* **connections**: at most ``max_connections`` open in total and
  ``max_connections_per_client`` from one client address; past either a new connection
  is answered 503 and closed at once.

Refusals are a small JSON document ``{"error": {"reason", "message"}}`` with
``Connection: close``, written straight to the transport (no app is involved).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from agent_cards.edge.limits import EdgeLimits
from contracts import strict_json

logger = logging.getLogger("agent_cards.edge")

HEADER_END = b"\r\n\r\n"


class ConnectionGate:
    """Open connections, in total and per client address (one per server)."""

    def __init__(self, limits: EdgeLimits) -> None:
        self._limits = limits
        self._per_client: Counter[str] = Counter()
        self.total = 0

    def admit(self, client: str) -> str | None:
        """Count the connection in, or say why it is refused (nothing counted then)."""
        if self.total >= self._limits.max_connections:
            return "too_many_connections"
        if self._per_client[client] >= self._limits.max_connections_per_client:
            return "too_many_client_connections"
        self.total += 1
        self._per_client[client] += 1
        return None

    def release(self, client: str) -> None:
        self.total -= 1
        self._per_client[client] -= 1
        if self._per_client[client] <= 0:
            del self._per_client[client]

    def of(self, client: str) -> int:
        return self._per_client[client]


def refusal_bytes(status: int, reason: str, message: str) -> bytes:
    body = strict_json.dumps({"error": {"reason": reason, "message": message}})
    head = [
        STATUS_LINE[status],
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
        b"connection: close\r\n",
        b"\r\n",
    ]
    return b"".join(head) + body


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """See the module docstring; :func:`bounded_protocol` makes one class per server."""

    edge_limits: EdgeLimits = EdgeLimits()
    gate: ConnectionGate = ConnectionGate(edge_limits)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._admitted_as: str | None = None
        self._in_headers = True
        self._header_bytes = 0
        self._tail = b""
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    # --- connections -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client[0] if self.client else ""
        refused = self.gate.admit(client)
        if refused is not None:
            logger.warning("connection from %s refused: %s", client, refused)
            self._refuse(503, refused, "too many open connections; try again later")
            return
        self._admitted_as = client
        self._start_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clocks()
        if self._admitted_as is not None:
            self.gate.release(self._admitted_as)
            self._admitted_as = None
        super().connection_lost(exc)

    # --- header bytes and time ---------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._admitted_as is None or self.transport.is_closing():
            return
        if self._in_headers:
            if self._header_timer is None:
                self._start_header_clock()
            if not self._headers_fit(data):
                limit = self.edge_limits.max_header_bytes
                self._refuse(431, "header_too_large", f"request headers exceed {limit} bytes")
                return
        super().data_received(data)

    def _headers_fit(self, data: bytes) -> bool:
        """Count the header bytes in ``data`` (up to the blank line ending the headers)."""
        window = self._tail + data
        end = window.find(HEADER_END)
        used = len(data) if end < 0 else end + len(HEADER_END) - len(self._tail)
        self._header_bytes += max(used, 0)
        self._tail = window[-(len(HEADER_END) - 1) :]
        return self._header_bytes <= self.edge_limits.max_header_bytes

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._cancel_header_clock()
        self._body_timer = self.loop.call_later(
            self.edge_limits.body_timeout_seconds, self._body_too_slow
        )
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel_body_clock()
        self._in_headers, self._header_bytes, self._tail = True, 0, b""
        super().on_message_complete()

    # --- clocks ------------------------------------------------------------------------------

    def _start_header_clock(self) -> None:
        self._cancel_header_clock()
        self._header_timer = self.loop.call_later(
            self.edge_limits.header_timeout_seconds, self._headers_too_slow
        )

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._in_headers and (self._header_bytes or self.cycle is None):
            self._refuse(408, "header_timeout", "the request headers took too long")
        elif self._in_headers:  # an idle keep-alive connection: the keep-alive timer's case
            self.transport.close()

    def _body_too_slow(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True
            cycle.message_event.set()
            self._refuse(408, "body_timeout", "the request body took too long")
        else:
            self.transport.close()

    def _cancel_header_clock(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_body_clock(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _stop_clocks(self) -> None:
        self._cancel_header_clock()
        self._cancel_body_clock()

    def _refuse(self, status: int, reason: str, message: str) -> None:
        self._stop_clocks()
        if not self.transport.is_closing():
            self.transport.write(refusal_bytes(status, reason, message))
            self.transport.close()


def bounded_protocol(limits: EdgeLimits) -> type[BoundedHttpToolsProtocol]:
    """A protocol class for one server: these limits and one connection gate."""
    return type(
        "BoundedHttpToolsProtocol",
        (BoundedHttpToolsProtocol,),
        {"edge_limits": limits, "gate": ConnectionGate(limits)},
    )


def uvicorn_options(limits: EdgeLimits) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that put a server behind these limits.

    Forwarded headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from
    ``limits.trusted_proxies``; with none (the default) they are ignored, so the client
    address every check sees (the console's login throttle, the logs) is the peer's own.
    uvicorn would otherwise believe them from loopback."""
    proxies = limits.trusted_proxies
    return {
        "http": bounded_protocol(limits),
        "timeout_keep_alive": limits.keep_alive_seconds,
        "h11_max_incomplete_event_size": limits.max_header_bytes,
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": list(proxies) if proxies else [],
    }
