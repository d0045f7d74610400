"""The small keep-alive client answers as httpx did, and keeps its connections bounded.

Plain JSON-RPC requests of an :class:`A2AClient` that made its own HTTP client go through
:mod:`coordinator.remote.http.keepalive`. A raw HTTP/1.1 server on loopback writes each answer
by hand (well formed, broken, too big, silent, reset); each misbehaviour must give the
same error type, reason and message through the small client as through httpx (an
``A2AClient`` given an httpx client built as its own), and the small client must be what
carried the request. Then what only the small client does: reuse, ``Connection: close``,
an idle connection the server closed, a request never sent twice, the pool's bound, the
header bounds and TLS verification.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.errors import FederationError, ProtocolError, TransportError
from coordinator.remote.http.client_limits import ClientLimits
from coordinator.remote.http.keepalive import KeepAlivePool, target_of
from coordinator.remote.wire.client import A2AClient
from tests.certificates import self_signed
from tests.servers import free_port

LIMITS = ClientLimits(read_timeout=0.5, total_timeout=20.0, max_response_bytes=10_000)
# Writes the answer to request number ``n`` (``rid`` is its JSON-RPC id); False closes.
Answer = Callable[[asyncio.StreamWriter, int, int], Awaitable[bool]]


def ok(rid: int, extra: bytes = b"") -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"ok": True}}).encode()
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (extra, len(body), body)


class Raw:
    """A raw HTTP/1.1 server: reads each request, lets ``answer`` write what it likes."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.url = ""
        self.connections = 0
        self.requests = 0
        self.open = 0
        self.most_open = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while (rid := await self._request(reader)) is not None:
                self.requests += 1
                if not await self.answer(writer, self.requests, rid):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test ended with this answer pending
        finally:
            self.open -= 1
            writer.close()

    async def _request(self, reader: asyncio.StreamReader) -> int | None:
        head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
        if not head:
            return None
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return int(json.loads(await reader.readexactly(length))["id"])


@asynccontextmanager
async def serving(answer: Answer, tls: ssl.SSLContext | None = None) -> AsyncIterator[Raw]:
    raw = Raw(answer)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0, ssl=tls)
    async with server:
        port = server.sockets[0].getsockname()[1]
        raw.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/"
        yield raw


def through_httpx() -> A2AClient:
    """An A2AClient on an httpx client built as its own is (the path before this one)."""
    http = httpx.AsyncClient(
        timeout=httpx.Timeout(LIMITS.read_timeout, connect=LIMITS.connect_timeout),
        follow_redirects=False,
        trust_env=False,
    )
    return A2AClient(http, LIMITS)


async def outcome(client: A2AClient, url: str, headers: dict[str, str] | None = None) -> Any:
    try:
        return await client.call_raw(url, "GetTask", {"id": "t"}, headers)
    except FederationError as exc:
        return exc


def described(result: Any) -> Any:
    if isinstance(result, FederationError):
        return type(result).__name__, result.reason, str(result)
    return result


# --- answers, well formed and not --------------------------------------------------------


async def chunked(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    body = ok(rid).split(b"\r\n\r\n", 1)[1]
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    writer.write(
        b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n"
        % (5, body[:5], len(body) - 5, body[5:])
    )
    return True


async def until_closed(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    writer.write(ok(rid).replace(b"HTTP/1.1", b"HTTP/1.0").split(b"Content-Length")[0] + b"\r\n")
    writer.write(ok(rid).split(b"\r\n\r\n", 1)[1])
    return False


def writes(data: bytes, keep: bool = False) -> Answer:
    async def answer(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        writer.write(data)
        return keep

    return answer


async def silent(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    await asyncio.sleep(5)
    return False


async def reset_mid_body(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"jsonrpc"')
    await writer.drain()
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
    return False


BIG = b"x" * 20_000
PARITY: dict[str, Answer] = {
    "chunked": chunked,
    "until closed": until_closed,
    "no answer": writes(b""),
    "malformed status line": writes(b"HTTX/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
    "malformed header": writes(b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 0\r\n\r\n"),
    "head too large": writes(b"HTTP/1.1 200 OK\r\nX-Big: %s\r\n" % (b"y" * 200_000)),
    "closed mid body": writes(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"json'),
    "declared too large": writes(b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + BIG),
    "chunks too large": writes(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4e20\r\n%s\r\n0\r\n\r\n" % BIG
    ),
    "too large until closed": writes(b"HTTP/1.0 200 OK\r\n\r\n" + BIG),
    "compressed": writes(
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}"
    ),
    "not json-rpc": writes(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n", True
    ),
    "silent": silent,
}


@pytest.mark.parametrize("name", list(PARITY))
def test_an_answer_is_taken_as_httpx_took_it(name: str) -> None:
    async def both() -> tuple[Any, Any, int]:
        async with (
            serving(PARITY[name]) as raw,
            A2AClient(limits=LIMITS) as small,
            through_httpx() as old,
        ):
            ours = await outcome(small, raw.url)
            theirs = await outcome(old, raw.url)
            assert small.keepalive is not None
            return ours, theirs, small.keepalive.requests

    ours, theirs, carried = asyncio.run(both())
    assert carried == 1
    if name in ("chunked", "until closed"):
        assert ours == theirs == {"ok": True}
    else:
        assert described(ours) == described(theirs)


def test_a_reset_mid_answer_is_a_transport_error_as_through_httpx() -> None:
    async def both() -> list[Any]:
        async with (
            serving(reset_mid_body) as raw,
            A2AClient(limits=LIMITS) as small,
            through_httpx() as old,
        ):
            return [await outcome(small, raw.url), await outcome(old, raw.url)]

    for result in asyncio.run(both()):
        assert isinstance(result, TransportError) and result.reason == "transport_error"


def test_a_refused_connection_is_unreachable_as_through_httpx() -> None:
    url = f"http://127.0.0.1:{free_port()}/"

    async def both() -> list[Any]:
        async with A2AClient(limits=LIMITS) as small, through_httpx() as old:
            return [described(await outcome(client, url)) for client in (small, old)]

    ours, theirs = asyncio.run(both())
    assert ours == theirs and ours[1] == "unreachable"


def test_a_header_that_would_split_the_request_is_refused_as_through_httpx() -> None:
    split = {"X-Split": "a\r\nX-Injected: 1"}

    async def both() -> tuple[Raw, list[Any]]:
        async with (
            serving(answers) as raw,
            A2AClient(limits=LIMITS) as small,
            through_httpx() as old,
        ):
            return raw, [
                described(await outcome(client, raw.url, split)) for client in (small, old)
            ]

    raw, (ours, theirs) = asyncio.run(both())
    assert ours == theirs and ours[1] == "transport_error"
    assert raw.requests == 0


# --- what only the small client does -----------------------------------------------------


async def answers(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    writer.write(ok(rid))
    return True


def in_a_row(answer: Answer, count: int) -> tuple[Raw, int]:
    """``count`` requests one after another to a server answering with ``answer``: the
    server's tally and how many connections the pool then keeps idle."""

    async def requests() -> tuple[Raw, int]:
        async with serving(answer) as raw, A2AClient(limits=LIMITS) as client:
            for _ in range(count):
                assert await outcome(client, raw.url) == {"ok": True}
            assert client.keepalive is not None
            return raw, client.keepalive.idle(raw.url)

    return asyncio.run(requests())


def test_requests_reuse_one_kept_alive_connection() -> None:
    raw, idle = in_a_row(answers, 3)
    assert (raw.connections, raw.requests, idle) == (1, 3, 1)


def test_connection_close_is_honoured() -> None:
    async def closing(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        writer.write(ok(rid, b"Connection: close\r\n"))
        await asyncio.sleep(3600)  # the server keeps its end open: the client must not reuse
        return False

    raw, idle = in_a_row(closing, 2)
    assert (raw.connections, raw.requests, idle) == (2, 2, 0)


def test_an_idle_connection_the_server_closed_is_replaced_before_sending() -> None:
    async def once(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        writer.write(ok(rid))  # says nothing of closing, then closes while idle
        return False

    async def two() -> Raw:
        async with serving(once) as raw, A2AClient(limits=LIMITS) as client:
            assert await outcome(client, raw.url) == {"ok": True}
            pool = client.keepalive
            assert pool is not None
            while pool.idle(raw.url):  # until the client has seen the server's close
                await asyncio.sleep(0.01)
            assert await outcome(client, raw.url) == {"ok": True}
            return raw

    raw = asyncio.run(two())
    assert (raw.connections, raw.requests) == (2, 2)


def test_an_idle_connection_with_an_unasked_answer_is_not_used() -> None:
    async def then_408(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        writer.write(ok(rid))
        writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        return True  # and the connection stays open

    async def two() -> Raw:
        async with serving(then_408) as raw, A2AClient(limits=LIMITS) as client:
            assert await outcome(client, raw.url) == {"ok": True}
            pool = client.keepalive
            assert pool is not None
            while pool.idle(raw.url):  # until the unasked answer reached the client
                await asyncio.sleep(0.01)
            assert await outcome(client, raw.url) == {"ok": True}
            return raw

    raw = asyncio.run(two())
    assert (raw.connections, raw.requests) == (2, 2)


def test_an_answer_larger_than_the_head_bound_is_read_whole() -> None:
    pad = "x" * 900_000

    async def large(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"pad": pad}}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

    async def one() -> Any:
        async with serving(large) as raw, A2AClient() as client:
            return await outcome(client, raw.url)

    assert asyncio.run(one()) == {"pad": pad}


def test_a_request_that_went_out_is_never_sent_again() -> None:
    async def then_hang_up(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        if n == 1:
            writer.write(ok(rid))
            return True
        return False  # the second request was read, and is not answered

    async def two() -> tuple[Raw, Any]:
        async with serving(then_hang_up) as raw, A2AClient(limits=LIMITS) as client:
            assert await outcome(client, raw.url) == {"ok": True}
            return raw, await outcome(client, raw.url)

    raw, second = asyncio.run(two())
    assert isinstance(second, TransportError) and second.reason == "transport_error"
    assert (raw.connections, raw.requests) == (1, 2)


def test_connections_stay_within_the_plain_request_slots() -> None:
    limits = ClientLimits(max_connections=6, max_streams=2)

    async def slow(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
        await asyncio.sleep(0.02)
        writer.write(ok(rid))
        return True

    async def burst() -> tuple[Raw, list[Any], int]:
        async with serving(slow) as raw, A2AClient(limits=limits) as client:
            results = await asyncio.gather(*(outcome(client, raw.url) for _ in range(20)))
            assert client.keepalive is not None
            return raw, results, client.keepalive.idle(raw.url)

    raw, results, idle = asyncio.run(burst())
    assert results == [{"ok": True}] * 20
    assert raw.most_open <= raw.connections <= limits.max_requests == 4
    assert idle == raw.connections


def test_too_many_headers_are_refused() -> None:
    headers = b"".join(b"X-%d: 1\r\n" % i for i in range(101))
    answer = writes(b"HTTP/1.1 200 OK\r\n%sContent-Length: 0\r\n\r\n" % headers)

    async def one() -> Any:
        async with serving(answer) as raw, A2AClient(limits=LIMITS) as client:
            return await outcome(client, raw.url)

    refused = asyncio.run(one())
    assert isinstance(refused, TransportError) and refused.reason == "transport_error"


def test_a_client_given_its_own_http_client_keeps_it_for_everything() -> None:
    async def given() -> A2AClient:
        async with httpx.AsyncClient() as http, A2AClient(http) as client:
            return client

    assert asyncio.run(given()).keepalive is None


def test_only_plain_http_urls_are_taken() -> None:
    assert target_of("http://127.0.0.1:8080/a2a?x=1") is not None
    assert target_of("https://[::1]/").host_header == b"[::1]"  # type: ignore[union-attr]
    for url in ("http://user:pw@host/", "http://hóst/", "ftp://host/", "http://host:99999/"):
        assert target_of(url) is None


# --- TLS -----------------------------------------------------------------------------------


def certificate(root: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for 127.0.0.1, and a client context
    that trusts it (and nothing else)."""
    cert, key = self_signed()
    (root / "cert.pem").write_bytes(cert)
    (root / "key.pem").write_bytes(key)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(root / "cert.pem", root / "key.pem")
    return server, ssl.create_default_context(cafile=str(root / "cert.pem"))


def test_an_untrusted_certificate_is_refused_as_through_httpx(tmp_path: Path) -> None:
    server_tls, _ = certificate(tmp_path)

    async def both() -> list[Any]:
        async with (
            serving(answers, server_tls) as raw,
            A2AClient(limits=LIMITS) as small,
            through_httpx() as old,
        ):
            return [described(await outcome(c, raw.url)) for c in (small, old)]

    ours, theirs = asyncio.run(both())
    assert ours == theirs and ours[:2] == ("TransportError", "unreachable")


def test_https_is_verified_and_kept_alive(tmp_path: Path) -> None:
    server_tls, client_tls = certificate(tmp_path)

    async def two() -> tuple[Raw, list[int]]:
        pool = KeepAlivePool(5.0, 5.0, 4, 10_000, tls=client_tls)
        try:
            async with serving(answers, server_tls) as raw:
                target = target_of(raw.url)
                assert target is not None
                body = json.dumps({"id": 7}).encode()
                replies = [await pool.request(target, "POST", {}, body) for _ in range(2)]
                return raw, [r.status for r in replies]
        finally:
            await pool.aclose()

    raw, statuses = asyncio.run(two())
    assert statuses == [200, 200] and (raw.connections, raw.requests) == (1, 2)


def test_an_oversized_answer_closes_its_connection() -> None:
    answer = writes(b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + BIG, keep=True)

    async def one() -> tuple[Any, int]:
        async with serving(answer) as raw, A2AClient(limits=LIMITS) as client:
            refused = await outcome(client, raw.url)
            assert client.keepalive is not None
            return refused, client.keepalive.idle(raw.url)

    refused, idle = asyncio.run(one())
    assert isinstance(refused, ProtocolError) and refused.reason == "response_too_large"
    assert idle == 0
