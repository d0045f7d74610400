"""Registering a specialist verifies its card signature against pinned keys before keeping it."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards.keys import SigningKey, TrustedKeys, b64url_encode
from agent_cards.signing import canonical_card, sign_card
from coordinator.errors import RegistryError
from coordinator.remote.cards.registration import Registration
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from tests.servers import free_port, running

KEY = SigningKey.generate()
PINNED = TrustAnchor(keys=TrustedKeys.from_json(KEY.public_jwk()))


def card(base: str) -> dict[str, Any]:
    return {
        "name": "risk",
        "description": "risk policy",
        "supportedInterfaces": [
            {"url": f"{base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "version": "1",
        "capabilities": {},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "securitySchemes": {
            "delegation": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
        },
        "skills": [
            {
                "id": "interpret-risk-policy",
                "name": "r",
                "description": "r",
                "tags": [],
                "securityRequirements": [{"schemes": {"delegation": {"list": ["risk:interpret"]}}}],
            }
        ],
    }


class CardHost:
    """Serves whatever card document and JWK Set the test puts here."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.document: dict[str, Any] = sign_card(card(base), KEY)
        self.jwks: dict[str, Any] = {"keys": [KEY.public_jwk()]}

    async def card(self, request: Request) -> Response:
        return JSONResponse(self.document)

    async def keys(self, request: Request) -> Response:
        return JSONResponse(self.jwks)

    def publish(self, document: dict[str, Any], key: SigningKey = KEY) -> None:
        unsigned = {k: v for k, v in document.items() if k != "signatures"}
        self.document = sign_card(unsigned, key)


@pytest.fixture
def host() -> Iterator[CardHost]:
    port = free_port()
    card_host = CardHost(f"http://127.0.0.1:{port}")
    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card_host.card),
            Route("/.well-known/jwks.json", card_host.keys),
        ]
    )
    with running(app, port=port):
        yield card_host


def register(
    host: CardHost, tmp_path: Path, anchor: TrustAnchor | None = PINNED, approve: bool = False
) -> Registration:
    async def go() -> Registration:
        async with A2AClient() as client:
            registry = Registry(DataDir(tmp_path))
            return await registry.register(client, host.base, anchor=anchor, approve=approve)

    return asyncio.run(go())


def refused(host: CardHost, tmp_path: Path, anchor: TrustAnchor | None = PINNED) -> str:
    with pytest.raises(RegistryError) as caught:
        register(host, tmp_path, anchor)
    assert not (tmp_path / "agents.json").exists(), "nothing is kept before verification"
    return caught.value.reason


def test_pinned_key_accepts_signed_card(host: CardHost, tmp_path: Path) -> None:
    """A card signed by the pinned key is registered with the kid that verified it."""
    registration = register(host, tmp_path)
    assert registration.status == "registered"
    assert registration.agent.verified_kid == KEY.kid
    assert registration.agent.trust == "pinned_key"


def test_unsigned_card_is_refused(host: CardHost, tmp_path: Path) -> None:
    """A card without signatures is refused as card_unsigned."""
    host.document = card(host.base)
    assert refused(host, tmp_path) == "card_unsigned"


def test_card_tampered_after_signing_is_refused(host: CardHost, tmp_path: Path) -> None:
    """Changing any field after signing breaks the signature."""
    host.document["skills"][0]["securityRequirements"] = []
    assert refused(host, tmp_path) == "card_signature_invalid"


def test_card_signed_by_unpinned_key_is_refused(host: CardHost, tmp_path: Path) -> None:
    """A valid signature by a key the operator did not pin is not trusted."""
    host.publish(card(host.base), SigningKey.generate())
    assert refused(host, tmp_path) == "card_kid_unknown"


def test_jku_never_chooses_the_trust_root(host: CardHost, tmp_path: Path) -> None:
    """A signature whose header names a jku elsewhere is refused, even when it verifies."""
    document = card(host.base)
    header = {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE", "jku": "http://127.0.0.1:9/k"}
    protected = b64url_encode(json.dumps(header).encode())
    signing_input = f"{protected}.{b64url_encode(canonical_card(document))}".encode()
    signature = KEY.private_key.sign(signing_input)  # type: ignore[call-arg]
    document["signatures"] = [{"protected": protected, "signature": b64url_encode(signature)}]
    host.document = document
    assert refused(host, tmp_path) == "card_header_invalid"


def test_no_trust_anchor_is_refused(host: CardHost, tmp_path: Path) -> None:
    """Without a pinned key, a kid or an explicit trust-on-first-use, nothing is registered."""
    assert refused(host, tmp_path, anchor=None) == "no_trust_anchor"


def test_expect_kid_pins_one_key_from_the_same_origin(host: CardHost, tmp_path: Path) -> None:
    """--expect-kid takes that one key from the origin's JWKS; an absent kid is refused."""
    registration = register(host, tmp_path, TrustAnchor(expect_kid=KEY.kid))
    assert registration.agent.trust == "pinned_kid"
    assert refused(host, tmp_path / "other", TrustAnchor(expect_kid="nope")) == "card_kid_unknown"


def test_trust_on_first_use_is_recorded(host: CardHost, tmp_path: Path) -> None:
    """Trust on first use works only when asked for, and says so in the registration."""
    registration = register(host, tmp_path, TrustAnchor(trust_on_first_use=True))
    assert registration.agent.trust == "trust_on_first_use"


def test_re_registration_uses_the_pins_kept(host: CardHost, tmp_path: Path) -> None:
    """A second registration verifies against the keys pinned the first time."""
    register(host, tmp_path)
    assert register(host, tmp_path, anchor=None).status == "unchanged"
    host.publish(card(host.base), SigningKey.generate())
    with pytest.raises(RegistryError) as caught:
        register(host, tmp_path, anchor=None)
    assert caught.value.reason == "card_kid_unknown"


def test_wider_card_is_held_pending_until_approved(host: CardHost, tmp_path: Path) -> None:
    """A new skill or scope is held as pending; the registered card stays until approval."""
    register(host, tmp_path)
    wider = copy.deepcopy(card(host.base))
    wider["skills"][0]["securityRequirements"][0]["schemes"]["delegation"]["list"].append(
        "payments:write"
    )
    host.publish(wider)
    pending = register(host, tmp_path)
    assert pending.status == "pending_approval"
    assert pending.agent.pending_card is not None
    stored = Registry(DataDir(tmp_path)).get("risk")
    assert "payments:write" not in json.dumps(stored.card)
    approved = register(host, tmp_path, approve=True)
    assert approved.status == "approved"
    assert "payments:write" in json.dumps(Registry(DataDir(tmp_path)).get("risk").card)


def test_narrower_card_is_adopted(host: CardHost, tmp_path: Path) -> None:
    """A card that asks for fewer scopes is adopted without approval."""
    register(host, tmp_path)
    narrower = copy.deepcopy(card(host.base))
    narrower["skills"][0]["securityRequirements"] = []
    host.publish(narrower)
    assert register(host, tmp_path).status == "narrowed"


def test_every_card_version_is_kept_with_its_approval_state(host: CardHost, tmp_path: Path) -> None:
    """With a store, each new card version is kept with its status, kid and pinned keys."""
    from sqlalchemy import select

    from coordinator.storage.schema import card_versions
    from coordinator.workspace import Workspace

    store = Workspace(DataDir(tmp_path)).run_store()

    async def go(approve: bool = False) -> Registration:
        async with A2AClient() as client:
            registry = Registry(DataDir(tmp_path), store=store)
            return await registry.register(client, host.base, anchor=PINNED, approve=approve)

    asyncio.run(go())
    wider = copy.deepcopy(card(host.base))
    wider["skills"].append({"id": "more", "name": "m", "description": "m", "tags": []})
    host.publish(wider)
    asyncio.run(go())
    asyncio.run(go(approve=True))
    with store.engine.connect() as connection:
        rows = connection.execute(
            select(card_versions.c.status, card_versions.c.verified_kid).order_by(
                card_versions.c.id
            )
        ).all()
    assert [row.status for row in rows] == ["registered", "pending_approval", "approved"]
    assert {row.verified_kid for row in rows} == {KEY.kid}
