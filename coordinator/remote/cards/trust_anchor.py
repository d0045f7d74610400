"""How the operator says which keys may sign an agent's card, and the keys that follow.

A key file (``--trust-key``), one kid looked up in the JWK Set served on the card's own
origin (``--expect-kid``), the keys pinned at an earlier registration, or, only when
asked for explicitly and recorded as such, whatever keys the origin serves now (trust on
first use). A ``jku`` in a card never chooses the trust root.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agent_cards.keys import TrustedKeys
from contracts import strict_json
from coordinator.errors import FederationError, RegistryError
from coordinator.remote.cards.card_verification import keys_from
from coordinator.remote.cards.registered_agent import RegisteredAgent, TrustKind
from coordinator.remote.wire.client import A2AClient, FetchedCard

JWKS_PATH = "/.well-known/jwks.json"


@dataclass(frozen=True)
class TrustAnchor:
    """How the operator says which keys may sign this agent's card."""

    keys: TrustedKeys | None = None
    expect_kid: str | None = None
    trust_on_first_use: bool = False
    # How pinned ``keys`` came to be trusted (keys held with a pending card keep theirs).
    kind: TrustKind | None = None

    @property
    def given(self) -> bool:
        return self.keys is not None or self.expect_kid is not None or self.trust_on_first_use


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def held_anchor(
    existing: RegisteredAgent | None, anchor: TrustAnchor, approve: bool
) -> TrustAnchor:
    """With ``--approve`` and no new anchor, the keys the held card was verified with
    (what the operator pinned when it was held), not the older card's."""
    if not approve or anchor.given or existing is None or not existing.pending_pins:
        return anchor
    return TrustAnchor(keys=keys_from(existing.pending_pins), kind=existing.pending_trust)


async def trust_for(
    client: A2AClient,
    fetched: FetchedCard,
    anchor: TrustAnchor,
    existing: RegisteredAgent | None,
) -> tuple[TrustedKeys, TrustKind]:
    """The keys this card must be signed with, and how they came to be trusted."""
    if anchor.keys is not None:
        return anchor.keys, anchor.kind or "pinned_key"
    if anchor.expect_kid is not None:
        # every kid in ``served`` is the thumbprint computed from its key, so this matches
        # the key itself, not a label the origin wrote next to it
        served = await _origin_keys(client, fetched.url)
        key = served.get(anchor.expect_kid)
        if key is None:
            raise RegistryError(
                f"kid {anchor.expect_kid!r} is not among the keys served by "
                f"{origin_of(fetched.url)}",
                "card_kid_unknown",
            )
        return TrustedKeys([key]), "pinned_kid"
    if existing is not None and existing.pinned_jwks.get("keys"):
        return keys_from(existing.pinned_jwks), existing.trust
    if anchor.trust_on_first_use:
        return await _origin_keys(client, fetched.url), "trust_on_first_use"
    raise RegistryError(
        "no trust anchor: pin the signing key with --trust-key FILE or --expect-kid KID "
        "(or, for development only, --trust-on-first-use)",
        "no_trust_anchor",
    )


async def _origin_keys(client: A2AClient, card_url: str) -> TrustedKeys:
    """The JWK Set served on the card's own origin; never a URL the card names."""
    url = origin_of(card_url) + JWKS_PATH
    try:
        document = await client.fetch_json(url, "JWK Set")
    except FederationError as exc:
        raise RegistryError(str(exc), bounded(exc.reason, "jwks_unavailable")) from None
    return keys_from(document)


def bounded(reason: str, otherwise: str) -> str:
    """A document refused by the bounded parser keeps that reason (``json_too_deep``,
    ``json_too_wide``)."""
    return reason if reason in (strict_json.JSON_TOO_DEEP, strict_json.JSON_TOO_WIDE) else otherwise
