"""A card's signature checked against pinned keys, and key sets read as pins.

A key set is usable only if every kid in it is its key's computed thumbprint
(:func:`keys_from`); a card is verified when one of its signatures verifies with a key of
the set, in the canonical forms of its version (:func:`verified_card`). A refusal is a
:class:`~coordinator.errors.RegistryError` with the verification's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_cards.keys import KID_NOT_THUMBPRINT, KeyMaterialError, TrustedKeys
from agent_cards.signing import (
    V03_FORMS,
    V1_FORMS,
    CardVerificationError,
    VerifiedCard,
    verify_card,
)
from agent_cards.trusted import VerificationKey
from coordinator.errors import RegistryError
from coordinator.remote.cards.pinned import pinned_key_set
from coordinator.remote.wire.v03.card import is_v03_card


def trusted_key(trusted: TrustedKeys, kid: str) -> VerificationKey:
    """The pinned key whose computed kid verified a card."""
    key = trusted.get(kid)
    assert key is not None  # verify_card returns the kid of a key in ``trusted``
    return key


def verified_kid(document: dict[str, Any], trusted: TrustedKeys, what: str) -> str:
    """The kid of a pinned key that signed ``document`` (see :func:`verified_card`)."""
    return verified_card(document, trusted, what).kid


def verified_card(document: dict[str, Any], trusted: TrustedKeys, what: str) -> VerifiedCard:
    """The pinned key that signed ``document`` and the form it signed (a v0.3 card may be
    signed in the v0.3 forms), or a :class:`RegistryError` with the verification's reason."""
    forms = V03_FORMS if is_v03_card(document) else V1_FORMS
    try:
        return verify_card(document, trusted, forms=forms)
    except CardVerificationError as exc:
        raise RegistryError(f"{what} refused: {exc}", exc.reason) from None


def keys_from(document: Any) -> TrustedKeys:
    """Keys whose kids are their computed thumbprints; a JWK labelled otherwise refuses the
    whole set (``kid_not_thumbprint``), since whoever wrote that label chose a key's name."""
    try:
        if isinstance(document, Mapping):  # a stored pin: parsed once per key set
            return pinned_key_set(document)
        return TrustedKeys.from_json(document)
    except KeyMaterialError as exc:
        raise RegistryError(f"unusable key set: {exc}", key_reason(exc, "jwks_invalid")) from None
    except ValueError as exc:
        raise RegistryError(f"unusable key set: {exc}", "jwks_invalid") from None


def key_reason(exc: KeyMaterialError, otherwise: str) -> str:
    """The reason code for refused key material: a kid mismatch keeps its own code."""
    return KID_NOT_THUMBPRINT if exc.reason == KID_NOT_THUMBPRINT else otherwise
