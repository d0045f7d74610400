"""An agent's identity: the RFC 9278 JWK Thumbprint URI of a key it signs its card with.

A delegation token's ``aud``, a push notification's ``iss``, a receipt's ``iss`` and a
signed tree head's ``iss`` name an agent by :func:`thumbprint_uri` of its card-signing
key: ``urn:ietf:params:oauth:jwk-thumbprint:sha-256:`` followed by the key's RFC 7638
thumbprint, computed here from the key material (never a ``kid`` a document states, and
never a URL a card names). Whoever holds the private key is that agent; a card that
names another agent's URL does not make its author that agent.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_cards.jwk import PublicKey, thumbprint_of
from agent_cards.trusted import VerificationKey

THUMBPRINT_URI_PREFIX = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:"


def thumbprint_uri(key: PublicKey) -> str:
    """The RFC 9278 URI of ``key``'s RFC 7638 SHA-256 thumbprint."""
    return THUMBPRINT_URI_PREFIX + thumbprint_of(key)


def identity_of(key: VerificationKey) -> str:
    """The identity a pinned key proves (its stated kid plays no part)."""
    return thumbprint_uri(key.public_key)


def identities_of(keys: Iterable[VerificationKey]) -> frozenset[str]:
    """The identities of every key in ``keys``: each one an agent may be known by."""
    return frozenset(identity_of(key) for key in keys)
