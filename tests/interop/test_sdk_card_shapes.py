"""Cards made and signed by the official a2a-sdk 1.3.0, in every security-scheme shape,
register with a pinned key.

Each card is built with the SDK's own types, signed with the SDK's own signer
(``create_agent_card_signer``) and served by the SDK's own card route (ProtoJSON, which
leaves out empty lists, empty strings and other defaults) on a real loopback server; the
coordinator's real ``register`` fetches it and verifies it with the pinned key. The SDK
signs the card without any empty value (a scope-less requirement vanishes from what it
signs), while A2A section 8.4.1 keeps required members and map entries whose value is
an empty message: where the two differ the registration says it was the SDK's form that
verified.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.server.routes import create_agent_card_routes
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    AuthorizationCodeOAuthFlow,
    ClientCredentialsOAuthFlow,
    DeviceCodeOAuthFlow,
    HTTPAuthSecurityScheme,
    ImplicitOAuthFlow,
    MutualTlsSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    OpenIdConnectSecurityScheme,
    PasswordOAuthFlow,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier
from google.protobuf import json_format
from jwt import PyJWK
from starlette.applications import Starlette

from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.signing import SDK_FORM, SPEC_FORM
from contracts.wire import AGENT_CARD_PATH
from coordinator.authority.delegator import required_scopes
from coordinator.remote.cards.registration import Registration
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.servers import free_port, running

KEY = SigningKey.generate()
PINNED = TrustAnchor(keys=TrustedKeys.from_json(KEY.public_jwk()))
TOKEN_URL = "https://auth.example/token"
AUTH_URL = "https://auth.example/authorize"
SCOPES = {"risk:interpret": "interpret risk policies"}

Shape = tuple[dict[str, SecurityScheme], list[SecurityRequirement]]


def _requirement(name: str, *scopes: str) -> SecurityRequirement:
    return SecurityRequirement(schemes={name: StringList(list=list(scopes))})


def _oauth(flows: OAuthFlows) -> SecurityScheme:
    return SecurityScheme(oauth2_security_scheme=OAuth2SecurityScheme(flows=flows))


def _flows() -> dict[str, OAuthFlows]:
    return {
        "authorization_code": OAuthFlows(
            authorization_code=AuthorizationCodeOAuthFlow(
                authorization_url=AUTH_URL, token_url=TOKEN_URL, scopes=SCOPES, pkce_required=True
            )
        ),
        "client_credentials": OAuthFlows(
            client_credentials=ClientCredentialsOAuthFlow(token_url=TOKEN_URL, scopes=SCOPES)
        ),
        "device_code": OAuthFlows(
            device_code=DeviceCodeOAuthFlow(
                device_authorization_url=AUTH_URL, token_url=TOKEN_URL, scopes=SCOPES
            )
        ),
        "implicit": OAuthFlows(implicit=ImplicitOAuthFlow(authorization_url=AUTH_URL)),
        "password": OAuthFlows(password=PasswordOAuthFlow(token_url=TOKEN_URL, scopes=SCOPES)),
    }


def _bearer() -> SecurityScheme:
    return SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))


SHAPES: dict[str, Callable[[], Shape]] = {
    "none": lambda: ({}, []),
    "bearer_without_scopes": lambda: ({"bearer": _bearer()}, [_requirement("bearer")]),
    "bearer_with_scopes": lambda: (
        {"bearer": _bearer()},
        [_requirement("bearer", "risk:interpret")],
    ),
    **{
        f"oauth2_{flow}": (
            lambda flows=flows, flow=flow: (
                {"oauth": _oauth(flows)},
                [_requirement("oauth", *([] if flow == "implicit" else ["risk:interpret"]))],
            )
        )
        for flow, flows in _flows().items()
    },
    "api_key": lambda: (
        {
            "key": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(location="header", name="X-API-Key")
            )
        },
        [_requirement("key")],
    ),
    "mtls": lambda: (
        {"mtls": SecurityScheme(mtls_security_scheme=MutualTlsSecurityScheme())},
        [_requirement("mtls")],
    ),
    "openid": lambda: (
        {
            "oidc": SecurityScheme(
                open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                    open_id_connect_url="https://auth.example/.well-known/openid-configuration"
                )
            )
        },
        [_requirement("oidc", "openid")],
    ),
}


def sdk_card(base_url: str, shape: Shape, description: str = "Echoes data") -> AgentCard:
    """A card as an SDK user writes one (no capability set), signed by the SDK's signer."""
    schemes, requirements = shape
    card = AgentCard(
        name="SDK Shapes",
        description=description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=base_url + "/a2a/jsonrpc"
            )
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        security_schemes=schemes,
        security_requirements=requirements,
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="echo data",
                tags=["echo"],
                security_requirements=requirements,
            )
        ],
    )
    signer = create_agent_card_signer(
        KEY.private_pem(), {"alg": "EdDSA", "kid": KEY.kid, "typ": "JOSE"}
    )
    return signer(card)


def serving(card_for: Callable[[str], AgentCard]) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running(Starlette(routes=create_agent_card_routes(card_for(base))), port=port) as url:
        yield url


def register(url: str, data_dir: Path) -> Registration:
    async def go() -> Registration:
        async with A2AClient() as client:
            return await Registry(DataDir(data_dir)).register(
                client, url, name="shapes", anchor=PINNED
            )

    return asyncio.run(go())


@pytest.fixture
def scope_less_bearer() -> Iterator[str]:
    yield from serving(lambda base: sdk_card(base, SHAPES["bearer_without_scopes"]()))


def test_an_sdk_signed_scope_less_bearer_card_registers(
    scope_less_bearer: str, tmp_path: Path
) -> None:
    """The usual card of an authenticated SDK agent: a Bearer scheme and a requirement
    naming it without scopes. It parses (the requirement's omitted ``list`` is empty),
    verifies in the SDK's form (which signed no requirement at all) and registers."""
    registration = register(scope_less_bearer, tmp_path)
    assert registration.status == "registered"
    assert registration.agent.verified_kid == KEY.kid
    assert registration.agent.verified_form == SDK_FORM
    requirement = registration.agent.agent_card.skills[0].security_requirements
    assert requirement is not None and requirement[0].schemes["bearer"].list == []


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sdk_signed_cards_of_every_security_shape_register(shape: str, tmp_path: Path) -> None:
    """Every security-scheme shape the SDK can write, signed by its signer and served by
    its card route, registers with the pinned key; the form that verified is recorded.
    The description is left empty, so ProtoJSON omits that required member too."""
    for url in serving(lambda base: sdk_card(base, SHAPES[shape](), description="")):
        registration = register(url, tmp_path)
        assert registration.status == "registered", shape
        assert registration.agent.verified_form in (SPEC_FORM, SDK_FORM)
        card = registration.agent.agent_card
        assert sorted(card.security_schemes or {}) == sorted(SHAPES[shape]()[0])


def test_remote_risks_card_verifies_with_the_sdks_verifier() -> None:
    """remote_risk's own card (whose service-wide requirement names the delegation scheme
    without scopes, so the SDK's form of it is other bytes) verifies with the a2a-sdk's
    verifier and the key remote_risk publishes, as an SDK client checks it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running(create_app(Settings(public_base_url=base)), port=port) as url:
        card = httpx.get(url + AGENT_CARD_PATH, timeout=10).json()
        jwks = httpx.get(url + "/.well-known/jwks.json", timeout=10).json()
    keys = {jwk["kid"]: PyJWK.from_dict(jwk) for jwk in jwks["keys"]}
    verifier = create_signature_verifier(lambda kid, jku: keys[kid], ["EdDSA", "ES256"])
    verifier(json_format.ParseDict(card, AgentCard()))
    (requirement,) = card["securityRequirements"]
    assert requirement["schemes"]["delegation"].get("list", []) == []


def _unsigned_requirements_dropped(signed: AgentCard, *, card_level: bool) -> AgentCard:
    """The signed card with its scope-less requirements taken out, signatures kept: what
    the SDK's form does not sign, changed by someone on the path."""
    changed = AgentCard()
    changed.CopyFrom(signed)
    changed.skills[0].ClearField("security_requirements")
    if card_level:
        changed.ClearField("security_requirements")
    return changed


@pytest.mark.parametrize("card_level", [False, True], ids=["skill", "skill_and_card"])
def test_what_the_sdk_form_leaves_unsigned_changes_nothing_asked_without_approval(
    card_level: bool, tmp_path: Path
) -> None:
    """The SDK's form signs no empty value, so a scope-less requirement can be taken out
    of a card on the path without breaking its signature. Such a change still verifies,
    but it can neither widen the scopes minted for the skill nor change what the agent
    asks for unnoticed: a skill whose own requirement goes falls back to the card's (the
    same), and a card whose every requirement goes is held for approval."""
    port = free_port()
    signed = sdk_card(f"http://127.0.0.1:{port}", SHAPES["bearer_without_scopes"]())
    with running(Starlette(routes=create_agent_card_routes(signed)), port=port) as url:
        first = register(url, tmp_path)
    changed = _unsigned_requirements_dropped(signed, card_level=card_level)
    with running(Starlette(routes=create_agent_card_routes(changed)), port=port) as url:
        second = register(url, tmp_path)
    assert second.agent.verified_form == SDK_FORM  # the signature did not notice
    before = required_scopes(first.agent.agent_card, "echo")
    assert before == frozenset()
    if card_level:
        assert second.status == "pending_approval"
        kept = Registry(DataDir(tmp_path)).get("shapes")
        assert kept.card == first.agent.card and kept.pending_card is not None
    else:
        assert second.status == "updated"
        assert required_scopes(second.agent.agent_card, "echo") == before
