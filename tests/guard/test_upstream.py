"""What the guard makes of an upstream that answers badly: each failure a typed error
with a stable reason, never the upstream's bytes; an A2A error passes on as itself.

The upstream is a real server on loopback answering each call with a canned reply."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts.wire import Task
from member_kit import errors
from member_kit.guard.upstream import Upstream, fetch_card
from tests.servers import free_port, running

MAX_BYTES = 2000
REPLIES = {
    "too-large": b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 5000 + b'"}',
    "not-json": b"<html>oops</html>",
    "duplicate": b'{"jsonrpc":"2.0","id":1,"id":1,"result":{}}',
    "other-id": b'{"jsonrpc":"2.0","id":99,"result":{}}',
    "no-task": b'{"jsonrpc":"2.0","id":1,"result":{"status":"done"}}',
    "not-found": b'{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no such task"}}',
    "internal": b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"trace..."}}',
}


async def reply(request: Request) -> Response:
    return Response(REPLIES[request.path_params["name"]], media_type="application/json")


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    card = Route("/{name}/.well-known/agent-card.json", reply, methods=["GET"])
    app = Starlette(routes=[Route("/{name}", reply, methods=["POST"]), card])
    with running(app) as url:
        yield url


def call(url: str) -> Task:
    async def once() -> Task:
        upstream = Upstream(url, max_bytes=MAX_BYTES, timeout=5, connections=2)
        try:
            return await upstream.call("GetTask", {"id": "t-1"}, Task)
        finally:
            await upstream.aclose()

    return asyncio.run(once())


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("too-large", "upstream_reply_too_large"),
        ("not-json", "upstream_reply_malformed"),
        ("duplicate", "upstream_reply_malformed"),
        ("other-id", "upstream_reply_malformed"),
        ("no-task", "upstream_reply_malformed"),
        ("internal", "upstream_reply_malformed"),
    ],
)
def test_a_bad_reply_is_an_upstream_failure_with_its_reason(
    upstream_url: str, name: str, reason: str
) -> None:
    with pytest.raises(errors.UpstreamFailure) as caught:
        call(f"{upstream_url}/{name}")
    assert caught.value.reason == reason
    assert "trace" not in caught.value.message and "oops" not in caught.value.message


def test_an_a2a_error_of_the_upstream_passes_on_as_itself(upstream_url: str) -> None:
    with pytest.raises(errors.A2AError) as caught:
        call(f"{upstream_url}/not-found")
    assert caught.value.kind.code == -32001


def test_an_upstream_that_does_not_listen_is_unreachable() -> None:
    with pytest.raises(errors.UpstreamFailure) as caught:
        call(f"http://127.0.0.1:{free_port()}/a2a/jsonrpc")
    assert caught.value.reason == "upstream_unreachable"


def test_a_card_too_large_or_not_json_is_refused_at_start(upstream_url: str) -> None:
    said = {"too-large": "exceeds 2000 bytes", "not-json": "is no A2A v1.0 Agent Card"}
    for name, message in said.items():
        with pytest.raises(errors.UpstreamCardInvalid, match=message):
            fetch_card(f"{upstream_url}/{name}", max_bytes=MAX_BYTES, timeout=5)
