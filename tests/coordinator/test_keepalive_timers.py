"""A kept-alive request sets a timer only where it may wait (issue 34): for the answer's
head. Writing a request the transport takes whole, and reading a body that came with the
head, cannot wait, so no timer is set for them; a body still to come is read under the
read timeout as before (tests/coordinator/test_keepalive_client.py holds the errors)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.remote.http.keepalive import KeepAlivePool, target_of
from tests.coordinator.test_keepalive_client import ok, serving


async def whole(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    writer.write(ok(rid))  # head and body in one write
    return True


async def body_later(writer: asyncio.StreamWriter, n: int, rid: int) -> bool:
    head, body = ok(rid).split(b"\r\n\r\n", 1)
    writer.write(head + b"\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write(body)
    return True


def timers_of_second_request(monkeypatch: pytest.MonkeyPatch, answer: Any) -> tuple[int, bytes]:
    """Timers set by the second request on one connection (the first one connects)."""
    timers: list[float | None] = []
    original = asyncio.timeout

    def counted(delay: float | None) -> asyncio.Timeout:
        timers.append(delay)
        return original(delay)

    async def go() -> tuple[int, bytes]:
        async with serving(answer) as raw:
            pool = KeepAlivePool(5.0, 5.0, 4, 10_000)
            target = target_of(raw.url)
            assert target is not None
            body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}'
            headers = {"Content-Type": "application/json"}
            await pool.request(target, "POST", headers, body)
            monkeypatch.setattr(asyncio, "timeout", counted)
            reply = await pool.request(target, "POST", headers, body)
            monkeypatch.setattr(asyncio, "timeout", original)
            await pool.aclose()
            assert raw.connections == 1
            return len(timers), reply.body

    return asyncio.run(go())


def test_a_request_answered_whole_sets_one_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    count, body = timers_of_second_request(monkeypatch, whole)
    assert b'"ok": true' in body
    assert count == 1  # the head's


def test_a_body_still_to_come_is_read_under_a_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    count, body = timers_of_second_request(monkeypatch, body_later)
    assert b'"ok": true' in body
    assert count == 2  # the head's and the body's
