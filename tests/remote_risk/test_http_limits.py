"""remote_risk's bounded HTTP edge, attacked over real loopback sockets (issue 13).

Each test replays one of the observed attacks against a server running with the edge's
uvicorn protocol and the service's middleware, and asserts the typed refusal and loose
bounds on time and memory (precise figures: ``bench/edge.py``). Attack traffic comes from
other loopback addresses (127.0.0.2 and up) than the well-behaved client (127.0.0.1).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_cards.edge.limits import EdgeLimits
from agent_cards.edge.protocol import uvicorn_options
from agent_cards.keys import KeySet, SigningKey, TrustedKeys
from contracts.wire import AGENT_CARD_PATH
from member_kit.server.app import JSONRPC_PATH
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests import tokens
from tests.edge_clients import (
    connection,
    read_response,
    request_head,
    rss_bytes,
    send_until_refused,
    status_of,
)
from tests.remote_risk.conftest import risk_input
from tests.servers import free_port, running
from tests.tokens import COORDINATOR_KEY, header

ISSUER = "urn:a2a-federation:coordinator"
LIMITS = EdgeLimits(
    header_timeout_seconds=1.0,
    body_timeout_seconds=1.0,
    max_body_bytes=1_000_000,
    max_connections=48,
    max_connections_per_client=8,
)
MB = 1024 * 1024


class Edge:
    def __init__(self, base_url: str, app: Any) -> None:
        self.base_url = base_url
        self.app = app
        self.agent_id = app.state.settings.agent_id
        self._jtis = iter(range(1, 1_000_000))

    def token(self) -> str:
        claims = tokens.delegation_claims(
            now=int(time.time()),
            issuer=ISSUER,
            audience=self.agent_id,
            scope="risk:interpret",
            jti=f"edge-{next(self._jtis)}",
        )
        return tokens.forge(header(), claims)

    def headers(self, **extra: str) -> dict[str, str]:
        return {"A2A-Version": "1.0", "Authorization": f"Bearer {self.token()}", **extra}

    def card_seconds(self) -> float:
        started = time.monotonic()
        response = httpx.get(self.base_url + AGENT_CARD_PATH, timeout=10)
        assert response.status_code == 200
        return time.monotonic() - started

    def post(self, body: bytes, **headers: str) -> httpx.Response:
        sent = {"Content-Type": "application/json", **headers}
        return httpx.post(self.base_url + JSONRPC_PATH, content=body, headers=sent, timeout=10)


@pytest.fixture(scope="module")
def edge() -> Iterator[Edge]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()])},
        signing_keys=KeySet(active=SigningKey.generate()),
        edge=LIMITS,
    )
    app = create_app(settings)
    with running(app, port=port, **uvicorn_options(LIMITS)) as url:
        yield Edge(url, app)


def send_body(data: Any) -> bytes:
    message = {
        "messageId": "m-edge",
        "role": "ROLE_USER",
        "parts": [{"data": data, "mediaType": "application/json"}],
        "metadata": {"handoffId": "handoff-7", "attempt": 1},
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    ).encode()


def edge_error(response: httpx.Response) -> tuple[int, str]:
    error = response.json()["error"]
    return error["code"], error["data"][0]["metadata"]["reason"]


# --- header bytes ----------------------------------------------------------------------------


def test_a_header_past_the_limit_is_431_before_the_rest_is_read(edge: Edge) -> None:
    with connection(edge.base_url, "127.0.0.2") as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 * 1024))
        response = read_response(sock)
    assert status_of(response) == 431
    assert b'"reason":"header_too_large"' in response


def test_a_100_mb_header_costs_neither_time_nor_memory(edge: Edge) -> None:
    """The observed attack: 28 s and 400 MB then; now refused at once, others unaffected."""
    before = rss_bytes()
    sent: list[int] = []
    started = time.monotonic()

    def attack() -> None:
        with connection(edge.base_url, "127.0.0.2", timeout=5) as sock:
            first = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: "
            sent.append(send_until_refused(sock, first, b"a" * 65536, 100 * MB))

    attacker = threading.Thread(target=attack)
    attacker.start()
    card_seconds = edge.card_seconds()
    attacker.join(timeout=30)
    assert not attacker.is_alive()
    assert time.monotonic() - started < 10
    assert sent[0] < 100 * MB, "the server stopped reading long before 100 MB"
    assert rss_bytes() - before < 64 * MB
    assert card_seconds < 2


# --- time to receive headers and body --------------------------------------------------------


def test_headers_that_never_end_are_408(edge: Edge) -> None:
    started = time.monotonic()
    with connection(edge.base_url, "127.0.0.3") as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        response = read_response(sock)
    assert status_of(response) == 408 and b"header_timeout" in response
    assert time.monotonic() - started < 6


def test_a_connection_that_sends_nothing_is_closed(edge: Edge) -> None:
    started = time.monotonic()
    with connection(edge.base_url, "127.0.0.3") as sock:
        response = read_response(sock)
    assert status_of(response) == 408
    assert time.monotonic() - started < 6


def test_a_body_that_never_ends_is_408(edge: Edge) -> None:
    headers = edge.headers(**{"Content-Type": "application/json", "Content-Length": "1000"})
    with connection(edge.base_url, "127.0.0.3") as sock:
        sock.sendall(request_head("POST", JSONRPC_PATH, headers) + b'{"jsonrpc"')
        response = read_response(sock)
    assert status_of(response) == 408 and b"body_timeout" in response


# --- body bytes ------------------------------------------------------------------------------


def test_the_token_is_checked_before_the_body_is_read(edge: Edge) -> None:
    """Without a token, a request announcing 100 MB is refused before one body byte."""
    headers = {"Content-Type": "application/json", "Content-Length": str(100 * MB)}
    with connection(edge.base_url, "127.0.0.4") as sock:
        sock.sendall(request_head("POST", JSONRPC_PATH, {"A2A-Version": "1.0", **headers}))
        response = read_response(sock)
    assert status_of(response) == 401 and b"token_missing" in response


def test_a_declared_length_past_the_limit_is_413_at_once(edge: Edge) -> None:
    headers = edge.headers(**{"Content-Type": "text/plain", "Content-Length": str(100 * MB)})
    with connection(edge.base_url, "127.0.0.4") as sock:
        sock.sendall(request_head("POST", JSONRPC_PATH, headers))
        response = read_response(sock)
    assert status_of(response) == 413 and b"body_too_large" in response


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "image/png"])
def test_a_streamed_body_past_the_limit_is_413_whatever_its_type(
    edge: Edge, content_type: str
) -> None:
    """A chunked 100 MB body (not JSON at all) is cut off just past 1 MB."""
    before = rss_bytes()
    started = time.monotonic()
    headers = edge.headers(**{"Content-Type": content_type, "Transfer-Encoding": "chunked"})
    chunk = b"10000\r\n" + b"[" * 65536 + b"\r\n"
    with connection(edge.base_url, "127.0.0.4") as sock:
        send_until_refused(sock, request_head("POST", JSONRPC_PATH, headers), chunk, 100 * MB)
        response = read_response(sock)
    if response:  # the answer may be lost to the reset of a connection still sending
        assert status_of(response) == 413 and b"-32600" in response
    assert time.monotonic() - started < 10
    assert rss_bytes() - before < 64 * MB


def test_a_body_within_the_limit_still_works(edge: Edge) -> None:
    response = edge.post(send_body(risk_input()), **edge.headers())
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# --- JSON depth, numbers and spelling --------------------------------------------------------

# Under the body cap (1 MB), but wider than any message: 450,000 items, 75,000 keys.
WIDE_ARRAY = b"[" + b"0," * 450_000 + b"0]"
WIDE_OBJECT = b"{" + b",".join(b'"k%05d":0' % n for n in range(75_000)) + b"}"


@pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        (send_body({"deep": "DEEP"}).replace(b'"DEEP"', b"[" * 1000 + b"]" * 1000), -32600,
         "json_too_deep"),
        (b"[" * 5000 + b"]" * 5000, -32600, "json_too_deep"),
        (send_body({"wide": "WIDE"}).replace(b'"WIDE"', WIDE_ARRAY), -32600, "json_too_wide"),
        (send_body({"wide": "WIDE"}).replace(b'"WIDE"', WIDE_OBJECT), -32600, "json_too_wide"),
        (send_body({**risk_input(), "n": 1e308 * 10}).replace(b"Infinity", b"1e400"),
         -32600, "json_number_out_of_range"),
        (send_body({**risk_input(), "n": 2**60}), -32600, "json_number_out_of_range"),
        (send_body({**risk_input(), "s": "\ud800"}), -32700, "json_lone_surrogate"),
        (json.dumps({"jsonrpc": "2.0"}).encode("utf-16"), -32700, "json_not_utf8"),
        (b"\xef\xbb\xbf" + send_body(risk_input()), -32700, "json_not_utf8"),
    ],
    ids=["deep-input", "deep-body", "wide-array", "wide-object", "1e400", "2**60",
         "lone-surrogate", "utf-16", "bom"],
)  # fmt: skip
def test_json_outside_the_shape_is_a_typed_error_without_a_traceback(
    edge: Edge, caplog: pytest.LogCaptureFixture, body: bytes, code: int, reason: str
) -> None:
    with caplog.at_level(logging.INFO):
        response = edge.post(body, **edge.headers())
    assert response.status_code == 200
    assert edge_error(response) == (code, reason)
    assert not [record for record in caplog.records if record.exc_info]
    assert "Traceback" not in caplog.text


def test_deep_json_without_a_token_is_401(edge: Edge) -> None:
    response = edge.post(b"[" * 5000 + b"]" * 5000, **{"A2A-Version": "1.0"})
    assert response.status_code == 401


# --- connections -----------------------------------------------------------------------------


def test_one_client_cannot_hold_more_than_its_share(edge: Edge) -> None:
    """Past 8 connections from 127.0.0.5 the next is 503; 127.0.0.1 is still served."""
    with contextlib.ExitStack() as stack:
        for _ in range(LIMITS.max_connections_per_client):
            stack.enter_context(connection(edge.base_url, "127.0.0.5"))
        time.sleep(0.1)
        with connection(edge.base_url, "127.0.0.5") as extra:
            response = read_response(extra)
        assert status_of(response) == 503 and b"too_many_client_connections" in response
        assert edge.card_seconds() < 2


def test_slowloris_from_many_addresses_is_shed_and_the_service_recovers(edge: Edge) -> None:
    """48 half-open requests fill the total; they are cut after the header timeout and
    the service answers again within seconds."""
    with contextlib.ExitStack() as stack:
        for index in range(LIMITS.max_connections):
            sock = stack.enter_context(connection(edge.base_url, f"127.0.1.{index + 1}"))
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.1)
        with connection(edge.base_url, "127.0.2.1") as extra:
            assert status_of(read_response(extra)) == 503
        deadline = time.monotonic() + 10
        while True:
            try:
                assert edge.card_seconds() < 2
                break
            except (httpx.HTTPError, AssertionError):
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.2)
