"""The upstream's card as the guard serves it (unsigned; the app signs it with its key).

What the upstream says about itself (name, description, version, provider, modes, its
skills' names, descriptions and examples) is kept. What is about reaching it and
trusting it is the guard's: the interfaces are the guard's own (JSON-RPC and HTTP+JSON
under its public URL, and gRPC when it serves it), the only security scheme is the
delegation Bearer scheme, each skill asks for the scope the operator gave it, the
receipts extension is declared, and what the guard does not forward (streaming, push
notifications, an extended card) is not offered. Every skill of the upstream needs a
scope, and every scope a skill.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts.wire import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from member_kit.errors import UpstreamCardInvalid
from member_kit.server.authorization.asked import SECURITY_SCHEME
from member_kit.settings import JSONRPC_PATH, REST_PATH

SCHEME_DESCRIPTION = (
    "A delegation token (typ delegation+jwt, EdDSA or ES256) minted for this agent by a "
    "trusted coordinator: aud is the RFC 9278 thumbprint URI of the key that signs this card "
    "(urn:ietf:params:oauth:jwk-thumbprint:sha-256:...), and the token is bound to one "
    "handoff. See docs/delegation-token.md."
)
RECEIPTS_DESCRIPTION = (
    "Every terminal task carries a receipt: a JWS by this card's key over the task id, the "
    "handoff id and attempt, the delegation token's jti and request digest, the digest of "
    "the artifacts returned and the final state (task.metadata under this URI). See "
    "docs/receipts-extension.md."
)
GUARD_NOTE = " (Served by a guard that checks every delegation token before the agent is asked.)"


def guarded_card(
    upstream: AgentCard,
    public_base_url: str,
    scopes: Mapping[str, str],
    grpc_address: str | None = None,
) -> AgentCard:
    """``upstream`` as the guard at ``public_base_url`` serves it, with ``scopes`` by skill;
    with ``grpc_address`` (host:port) the gRPC binding is listed last."""
    _check_scopes(upstream, scopes)
    base = public_base_url.rstrip("/")
    grpc = (
        [
            AgentInterface(
                url=grpc_address, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION
            )
        ]
        if grpc_address is not None
        else []
    )
    return upstream.model_copy(
        update={
            "description": upstream.description + GUARD_NOTE,
            "supported_interfaces": [
                AgentInterface(
                    url=base + JSONRPC_PATH,
                    protocol_binding="JSONRPC",
                    protocol_version=PROTOCOL_VERSION,
                ),
                AgentInterface(
                    url=base + REST_PATH,
                    protocol_binding="HTTP+JSON",
                    protocol_version=PROTOCOL_VERSION,
                ),
                *grpc,
            ],
            "capabilities": _capabilities(),
            "security_schemes": {SECURITY_SCHEME: _scheme()},
            "security_requirements": [_requirement([])],
            "skills": [_skill(skill, scopes[skill.id]) for skill in upstream.skills],
            "signatures": None,
        }
    )


def _check_scopes(upstream: AgentCard, scopes: Mapping[str, str]) -> None:
    offered = {skill.id for skill in upstream.skills}
    if not offered:
        raise UpstreamCardInvalid("the upstream card declares no skill")
    unscoped = sorted(offered - set(scopes))
    if unscoped:
        raise UpstreamCardInvalid(f"no --skill-scope for the upstream's skills {unscoped}")
    unknown = sorted(set(scopes) - offered)
    if unknown:
        raise UpstreamCardInvalid(f"--skill-scope names skills the upstream lacks: {unknown}")


def _capabilities() -> AgentCapabilities:
    receipts = AgentExtension(uri=RECEIPTS_EXTENSION_URI, description=RECEIPTS_DESCRIPTION)
    return AgentCapabilities(
        streaming=False, push_notifications=False, extended_agent_card=False, extensions=[receipts]
    )


def _scheme() -> SecurityScheme:
    bearer = HTTPAuthSecurityScheme(
        scheme="Bearer", bearer_format="JWT", description=SCHEME_DESCRIPTION
    )
    return SecurityScheme(http_auth_security_scheme=bearer)


def _requirement(scopes: list[str]) -> SecurityRequirement:
    return SecurityRequirement(schemes={SECURITY_SCHEME: StringList(list=scopes)})


def _skill(skill: AgentSkill, scope: str) -> AgentSkill:
    return skill.model_copy(update={"security_requirements": [_requirement([scope])]})
