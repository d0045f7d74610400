"""The coordinator API's bounded HTTP edge, over real loopback sockets (issue 13).

The observed attacks: a 100 MB body read whole before the 8 MB check (memory 198 -> 486
MB), an unpaired surrogate answered 500, ``1e400`` taken as ``null``, and the header and
connection limits shared with remote_risk (:mod:`agent_cards.edge.protocol`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from agent_cards.edge.protocol import uvicorn_options
from coordinator.authority.identity import coordinator_keys
from coordinator.service.http.api import create_api
from coordinator.service.http.limits import coordinator_limits
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.edge_clients import (
    connection,
    read_response,
    request_head,
    rss_bytes,
    send_until_refused,
    status_of,
)
from tests.servers import running

TOKEN = "operator-token-for-tests-0123456789"
MB = 1024 * 1024
LIMITS = replace(coordinator_limits({}), header_timeout_seconds=2.0, body_timeout_seconds=2.0)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = DataDir(Path(tmp_path_factory.mktemp("edge")) / "data")
    coordinator_keys(data)
    ws = Workspace(data)
    settings = CoordinatorSettings(operator_token=TOKEN)
    with running(create_api(ws, settings), **uvicorn_options(LIMITS)) as url:
        yield url
    ws.close()


def post(api: str, body: bytes, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(api + "/v1/delegations", content=body, headers=headers, timeout=10)


def delegation(value: str) -> bytes:
    text = '{"to": "remote-risk", "skill": "interpret-risk-policy", "input": {"v": VALUE}}'
    return text.replace("VALUE", value).encode()


def test_the_default_body_limit_is_8_mib() -> None:
    assert coordinator_limits({}).max_body_bytes == 8 * MB
    assert coordinator_limits({"FEDERATION_MAX_BODY_BYTES": "1024"}).max_body_bytes == 1024


def test_a_100_mb_body_is_413_while_streaming_in(api: str) -> None:
    before = rss_bytes()
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {TOKEN}", "Transfer-Encoding": "chunked"}
    chunk = b"10000\r\n" + b"x" * 65536 + b"\r\n"
    with connection(api, "127.0.0.6") as sock:
        send_until_refused(sock, request_head("POST", "/v1/delegations", headers), chunk, 100 * MB)
        response = read_response(sock)
    if response:  # the answer may be lost to the reset of a connection still sending
        assert status_of(response) == 413 and b"body_too_large" in response
    assert time.monotonic() - started < 10
    assert rss_bytes() - before < 64 * MB


def test_a_declared_100_mb_body_is_413_at_once(api: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Length": str(100 * MB)}
    with connection(api, "127.0.0.6") as sock:
        sock.sendall(request_head("POST", "/v1/delegations", headers))
        response = read_response(sock)
    assert status_of(response) == 413 and b"body_too_large" in response


def test_the_operator_token_is_checked_before_the_body(api: str) -> None:
    headers = {"Content-Length": str(100 * MB)}
    with connection(api, "127.0.0.6") as sock:
        sock.sendall(request_head("POST", "/v1/delegations", headers))
        response = read_response(sock)
    assert status_of(response) == 401 and b"token_missing" in response


# Under the body cap, but wider than any message: 3 million items (6 MB), 75,000 keys (1 MB).
WIDE_ARRAY = "[" + "0," * 3_000_000 + "0]"
WIDE_OBJECT = "{" + ",".join(f'"k{n:05d}":0' for n in range(75_000)) + "}"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('"\\ud800"', "json_lone_surrogate"),
        ('"a\\udc00b"', "json_lone_surrogate"),
        ("1e400", "json_number_out_of_range"),
        ("-1e400", "json_number_out_of_range"),
        ("123456789012345678901234567890", "json_number_out_of_range"),
        ("[" * 2000 + "]" * 2000, "json_too_deep"),
        (WIDE_ARRAY, "json_too_wide"),
        (WIDE_OBJECT, "json_too_wide"),
    ],
    ids=["surrogate", "low-surrogate", "1e400", "-1e400", "long-int", "deep", "wide-array",
         "wide-object"],
)  # fmt: skip
def test_json_outside_the_shape_is_422_never_500(
    api: str, caplog: pytest.LogCaptureFixture, value: str, reason: str
) -> None:
    with caplog.at_level(logging.INFO):
        response = post(api, delegation(value))
    assert response.status_code == 422
    assert response.json()["error"]["reason"] == reason
    assert not [record for record in caplog.records if record.exc_info]


def test_a_paired_surrogate_and_ordinary_numbers_pass_the_edge(api: str) -> None:
    """Within the shape the request reaches the route (which knows no such agent)."""
    response = post(api, delegation('["\\ud83d\\ude00", 1e300, 9007199254740991]'))
    assert response.status_code == 404, response.text
    assert response.json()["error"]["reason"] == "unknown_agent"


def test_a_header_past_the_limit_is_431(api: str) -> None:
    with connection(api, "127.0.0.6") as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 * 1024))
        response = read_response(sock)
    assert status_of(response) == 431


def test_json_bodies_of_the_api_still_parse(api: str) -> None:
    response = httpx.get(api + "/v1/agents", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and json.loads(response.text) is not None
