"""An httpx transport that reads every model reply with a byte cap before anyone parses it.

Both services' model adapters put this transport under the ``openai`` client, so no reply
larger than ``max_bytes`` is ever held in memory:

* a declared ``Content-Length`` over the cap is refused before the body is read;
* the body is read chunk by chunk and refused as soon as it passes the cap;
* the request asks for ``Accept-Encoding: identity``; a server that compresses anyway is
  decoded here with the same cap on the decoded size (``gzip`` and ``deflate``; any other
  encoding is refused), so a small compressed body cannot become a large reply;
* the response handed on is the decoded, complete body, without ``Content-Encoding``.

A refusal is the exception the service's ``refuse(reason, message)`` makes, with the
reason ``model_reply_too_large`` or ``model_reply_malformed``; it passes through the
``openai`` client unchanged, so each service sees its own typed model failure.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, Callable
from typing import cast

import httpx

from agent_cards import tls

__all__ = ["REPLY_MALFORMED", "REPLY_TOO_LARGE", "BoundedTransport", "Refusal", "decoded"]

REPLY_TOO_LARGE = "model_reply_too_large"
REPLY_MALFORMED = "model_reply_malformed"
Refusal = Callable[[str, str], Exception]
_DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})
_DROPPED_HEADERS = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})
# zlib: accept a gzip or a zlib header.
_AUTO_HEADER_WBITS = 32 + zlib.MAX_WBITS


class BoundedTransport(httpx.AsyncBaseTransport):
    """Sends through ``inner`` and returns only complete replies of at most ``max_bytes``."""

    def __init__(
        self, max_bytes: int, refuse: Refusal, inner: httpx.AsyncBaseTransport | None = None
    ) -> None:
        if max_bytes < 1:
            raise ValueError("the reply cap must be at least one byte")
        self.max_bytes = max_bytes
        self.refuse = refuse
        self._inner = inner or httpx.AsyncHTTPTransport(verify=tls.verified(True))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        try:
            _check_declared_length(response, self.max_bytes, self.refuse)
            raw = await _read_capped(response, self.max_bytes, self.refuse)
        finally:
            await response.aclose()
        encoding = response.headers.get("content-encoding", "")
        body = decoded(encoding, raw, self.max_bytes, self.refuse)
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _DROPPED_HEADERS]
        return httpx.Response(
            response.status_code,
            headers=headers,
            content=body,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _check_declared_length(response: httpx.Response, max_bytes: int, refuse: Refusal) -> None:
    declared = response.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > max_bytes:
        raise refuse(
            REPLY_TOO_LARGE, f"the model reply declares {declared} bytes; the cap is {max_bytes}"
        )


async def _read_capped(response: httpx.Response, max_bytes: int, refuse: Refusal) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in cast(AsyncIterable[bytes], response.stream):
        size += len(chunk)
        if size > max_bytes:
            raise refuse(REPLY_TOO_LARGE, f"the model reply exceeds {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decoded(encoding: str, raw: bytes, max_bytes: int, refuse: Refusal) -> bytes:
    """``raw`` decoded per ``Content-Encoding``, never to more than ``max_bytes``."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return raw
    if name not in _DECODABLE:
        raise refuse(REPLY_MALFORMED, f"the model reply has an unsupported encoding {name}")
    decompressor = zlib.decompressobj(_AUTO_HEADER_WBITS)
    try:
        body = decompressor.decompress(raw, max_bytes + 1)
    except zlib.error:
        problem = "the model reply is not valid compressed data"
        raise refuse(REPLY_MALFORMED, problem) from None
    if len(body) > max_bytes or decompressor.unconsumed_tail:
        raise refuse(REPLY_TOO_LARGE, f"the decoded model reply exceeds {max_bytes} bytes")
    return body
