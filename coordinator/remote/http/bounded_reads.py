"""A response read under the client's caps: its body, or the events of a stream.

A body is read raw (an encoding we did not ask for is refused) and never past the cap on
a response; a streamed response's events are read within one total deadline for the
whole stream, under a cap on each event and on the whole stream. Shared by every binding
the :class:`~coordinator.remote.wire.client.A2AClient` carries over HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from coordinator.errors import ProtocolError, TransportError
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.http.http1 import refuse_declared, refuse_encoding, refuse_over
from coordinator.remote.http.sse import SSEDecoder


async def events(
    response: httpx.Response, deadline: float, endpoint: str, limits: ClientLimits
) -> AsyncIterator[bytes]:
    """The ``data`` of each SSE event; a plain JSON body is passed on as one event."""
    refuse_encoding(response.headers.get("content-encoding"))
    media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "text/event-stream":
        body = await before(deadline, read_body(response, limits.max_response_bytes), endpoint)
        if response.status_code != 200 and not body:
            raise TransportError(f"HTTP {response.status_code} from {endpoint}", "http_status")
        yield body
        return
    decoder = SSEDecoder(limits.max_response_bytes)
    chunks = response.aiter_raw()
    total = 0
    while True:
        try:
            chunk = await before(deadline, anext(chunks), endpoint)
        except StopAsyncIteration:
            return
        total += len(chunk)
        if total > limits.max_stream_bytes:
            raise ProtocolError(
                f"stream exceeds {limits.max_stream_bytes} bytes", "response_too_large"
            )
        for data in decoder.feed(chunk):
            yield data


async def read_body(response: httpx.Response, cap: int) -> bytes:
    """Read the raw body, refusing encodings we did not ask for and oversized bodies."""
    refuse_encoding(response.headers.get("content-encoding"))
    refuse_declared(response.headers.get("content-length"), cap)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
        refuse_over(size, cap)
        chunks.append(chunk)
    return b"".join(chunks)


async def before(deadline: float, awaitable: Any, endpoint: str) -> Any:
    """Await ``awaitable`` unless the stream's total deadline passes first."""
    left = deadline - asyncio.get_running_loop().time()
    try:
        return await asyncio.wait_for(awaitable, max(0.0, left))
    except TimeoutError:
        raise TransportError(f"stream from {endpoint}: total deadline passed", "timeout") from None
