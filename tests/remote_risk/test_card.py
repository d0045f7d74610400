"""The risk service serves its card at the well-known path, cacheably, over loopback HTTP."""

from __future__ import annotations

import hashlib

import httpx

from contracts.wire import AGENT_CARD_PATH, AgentCard
from member_kit.server.app import JSONRPC_PATH
from tests.remote_risk.conftest import RiskPeer, risk_peer


def test_card_is_v1_with_interface_at_this_service(peer: RiskPeer) -> None:
    """The served card parses strictly and its JSON-RPC 1.0 interface points at this service."""
    response = httpx.get(peer.base_url + AGENT_CARD_PATH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    card = AgentCard.model_validate(response.json())
    interface = card.jsonrpc_interface()
    assert interface is not None
    assert interface.url == peer.base_url + JSONRPC_PATH
    assert interface.protocol_version == "1.0"
    assert "url" not in response.json() and "protocolVersion" not in response.json()


def test_card_has_strong_etag_and_max_age(peer: RiskPeer) -> None:
    """The ETag is strong (the body's SHA-256) and Cache-Control carries max-age."""
    response = httpx.get(peer.base_url + AGENT_CARD_PATH)
    etag = response.headers["etag"]
    assert not etag.startswith("W/")
    assert etag == f'"{hashlib.sha256(response.content).hexdigest()}"'
    assert "max-age=300" in response.headers["cache-control"]


def test_conditional_get_answers_304(peer: RiskPeer) -> None:
    """If-None-Match with the current tag (alone, in a list, weak, or *) answers 304, no body."""
    url = peer.base_url + AGENT_CARD_PATH
    etag = httpx.get(url).headers["etag"]
    for header in (etag, f'"other", {etag}', f"W/{etag}", "*"):
        response = httpx.get(url, headers={"If-None-Match": header})
        assert response.status_code == 304, header
        assert response.content == b""
        assert response.headers["etag"] == etag
        assert "max-age" in response.headers["cache-control"]


def test_stale_tag_gets_the_card(peer: RiskPeer) -> None:
    """A tag that does not match the current card gets the full card again."""
    response = httpx.get(peer.base_url + AGENT_CARD_PATH, headers={"If-None-Match": '"stale"'})
    assert response.status_code == 200
    assert response.json()["name"] == "remote-risk"


def test_max_age_follows_settings() -> None:
    """card_max_age_seconds sets the advertised max-age."""
    with risk_peer(card_max_age_seconds=60) as configured:
        response = httpx.get(configured.base_url + AGENT_CARD_PATH)
    assert response.headers["cache-control"] == "public, max-age=60"


def test_jsonrpc_path_takes_only_post(peer: RiskPeer) -> None:
    """GET on the JSON-RPC endpoint is 405, and there is no OpenAPI or docs surface."""
    assert httpx.get(peer.base_url + JSONRPC_PATH).status_code == 405
    assert httpx.get(peer.base_url + "/docs").status_code == 404
    assert httpx.get(peer.base_url + "/openapi.json").status_code == 404
