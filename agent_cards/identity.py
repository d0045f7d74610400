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
from datetime import UTC, datetime

from agent_cards.jwk import PublicKey, thumbprint_of
from agent_cards.keys import KeySet, SigningKey
from agent_cards.trusted import VerificationKey
from contracts.grant import THUMBPRINT_URI_PREFIX

__all__ = [
    "THUMBPRINT_URI_PREFIX",
    "identities_of",
    "identity_of",
    "signing_key_named",
    "thumbprint_uri",
]


def thumbprint_uri(key: PublicKey) -> str:
    """The RFC 9278 URI of ``key``'s RFC 7638 SHA-256 thumbprint."""
    return THUMBPRINT_URI_PREFIX + thumbprint_of(key)


def identity_of(key: VerificationKey) -> str:
    """The identity a pinned key proves. A :class:`VerificationKey` is only ever made with
    its kid equal to the thumbprint of its key material (checked on construction), so that
    kid is the thumbprint, computed once; a key made without a kid is computed here."""
    if isinstance(key.kid, str):
        return THUMBPRINT_URI_PREFIX + key.kid
    return thumbprint_uri(key.public_key)


def identities_of(keys: Iterable[VerificationKey]) -> frozenset[str]:
    """The identities of every key in ``keys``: each one an agent may be known by."""
    return frozenset(identity_of(key) for key in keys)


def signing_key_named(keys: KeySet, identity: object, now: datetime | None = None) -> SigningKey:
    """The key of ``keys`` whose identity is ``identity``, while it still verifies (the
    active key, the published one, or an earlier one in its grace); else the active key.

    What an agent signs for a token is signed by the key the token was minted for, so a
    coordinator that has not yet adopted a rotated key still verifies what comes back."""
    current = keys.effective(now)
    candidates = [current.active]
    if current.published is not None:
        candidates.append(current.published.key)
    at = now or datetime.now(UTC)
    candidates += [old.key for old in current.retired if at < old.not_after]
    for key in candidates:
        if identity_of(key.verification_key()) == identity:
            return key
    return current.active
