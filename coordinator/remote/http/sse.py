"""Server-Sent Events, read incrementally under a cap: how A2A streams arrive over HTTP.

JSON-RPC and HTTP+JSON both stream ``text/event-stream``; only the ``data`` of each event
matters to A2A (a JSON-RPC response, or a ``StreamResponse``).
"""

from __future__ import annotations

from coordinator.errors import ProtocolError


class SSEDecoder:
    """Incremental Server-Sent Events parsing: bytes in, the ``data`` of each event out.

    Only ``data`` fields matter to A2A; ``event``, ``id``, ``retry`` and comments are
    skipped. One event larger than ``max_event_bytes`` is refused.
    """

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._buffer = b""
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        events: list[bytes] = []
        while True:
            line, found = self._next_line()
            if not found:
                break
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                self._data, self._size = [], 0
            elif line.startswith(b"data:"):
                value = line[5:]
                self._add(value[1:] if value.startswith(b" ") else value)
        if len(self._buffer) + self._size > self._max:
            raise ProtocolError(f"a stream event exceeds {self._max} bytes", "response_too_large")
        return events

    def _next_line(self) -> tuple[bytes, bool]:
        """The next complete line (ended by CRLF, LF or CR) and whether there was one."""
        ends = [i for i in (self._buffer.find(b"\r"), self._buffer.find(b"\n")) if i >= 0]
        if not ends:
            return b"", False
        index = min(ends)
        width = 1
        if self._buffer[index : index + 1] == b"\r":
            if index + 1 == len(self._buffer):
                return b"", False  # a CR at the end may be the first half of CRLF
            if self._buffer[index + 1 : index + 2] == b"\n":
                width = 2
        line = self._buffer[:index]
        self._buffer = self._buffer[index + width :]
        return line, True

    def _add(self, value: bytes) -> None:
        self._size += len(value) + 1
        if self._size > self._max:
            raise ProtocolError(f"a stream event exceeds {self._max} bytes", "response_too_large")
        self._data.append(value)
