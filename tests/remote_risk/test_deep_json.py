"""remote_risk holds what a caller sends to the same depth rule as the coordinator.

A 20,000-deep request body (JSON-RPC or HTTP+JSON, under either JSON media type) and a
bearer token whose JWS header is 20,000 levels deep are each refused with a typed error,
never a ``RecursionError`` and a 500.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent_cards.keys import KeySet, SigningKey, TrustedKeys, b64url_encode
from remote_risk.service import create_app
from remote_risk.settings import JSONRPC_PATH, REST_PATH, Settings
from tests.remote_risk.conftest import RiskPeer
from tests.servers import free_port, running
from tests.tokens import COORDINATOR_KEY

DEPTH = 20_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
ISSUER = "urn:a2a-federation:coordinator"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()])},
        signing_keys=KeySet(active=SigningKey.generate()),
    )
    with running(create_app(settings), port=port) as url:
        yield url


@pytest.mark.parametrize("media_type", ["application/json", "application/a2a+json"])
@pytest.mark.parametrize("path", [JSONRPC_PATH, REST_PATH + "/message:send"])
def test_a_deep_request_body_is_refused(peer: RiskPeer, path: str, media_type: str) -> None:
    """Past the token check (anonymous here), the body itself is refused."""
    headers = {"Content-Type": media_type, "A2A-Version": "1.0"}
    answer = httpx.post(peer.base_url + path, content=DEEP, headers=headers, timeout=30)
    assert answer.status_code < 500, answer.text
    assert "json_too_deep" in answer.text or "nest deeper than 64" in answer.text


def test_a_bearer_token_with_a_deep_header_is_refused(base: str) -> None:
    token = b64url_encode(DEEP) + ".e30.c2ln"
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}'
    headers = {
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
        "Authorization": f"Bearer {token}",
    }
    answer = httpx.post(base + JSONRPC_PATH, content=body, headers=headers, timeout=30)
    assert answer.status_code in (400, 401), answer.text
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_deep_page_token_is_invalid_params(peer: RiskPeer) -> None:
    """ListTasks' pageToken is the caller's to write: a 20,000-deep one is refused."""
    token = b64url_encode(DEEP)
    answer = peer.call("ListTasks", {"pageToken": token})
    assert answer["error"]["code"] == -32602, answer
