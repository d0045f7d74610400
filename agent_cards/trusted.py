"""Pinned public keys: what a verifier trusts, ``kid`` to public key.

:class:`VerificationKey` is one public key bound to one algorithm, optionally valid only
until ``not_after``; its ``kid`` must be the key's RFC 7638 thumbprint.
:class:`TrustedKeys` holds such keys by kid, loaded from a JWK or JWK Set that was pinned
out of band (:func:`verification_key_from_jwk`). Nothing here fetches keys from a URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_cards.jwk import (
    KID_PATTERN,
    Algorithm,
    KeyMaterialError,
    PublicKey,
    algorithm_of,
    check_kid,
    public_jwk_members,
    public_key_from_jwk,
)
from contracts import strict_json


@dataclass(frozen=True)
class VerificationKey:
    """A public key pinned to one algorithm, valid for verification until ``not_after``.

    Its ``kid`` must be the key's RFC 7638 thumbprint; any other is refused on
    construction, so no path can pin a key under a label it chose.
    """

    kid: str
    alg: Algorithm
    public_key: PublicKey = field(repr=False)
    not_after: datetime | None = None

    def __post_init__(self) -> None:
        check_kid(self.kid, self.public_key)
        if algorithm_of(self.public_key) != self.alg:
            raise KeyMaterialError(f"a {algorithm_of(self.public_key)} key cannot be {self.alg}")

    @cached_property
    def ed25519_public(self) -> bytes:
        """The raw 32-byte public key, derived once: libsodium verifies an Ed25519
        signature with it (:mod:`agent_cards.signatures`); empty for any other key."""
        if not isinstance(self.public_key, Ed25519PublicKey):
            return b""
        return self.public_key.public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    def valid_at(self, at: datetime) -> bool:
        return self.not_after is None or at < self.not_after

    def to_jwk(self) -> dict[str, str]:
        return {
            **public_jwk_members(self.public_key),
            "kid": self.kid,
            "alg": self.alg,
            "use": "sig",
        }


class TrustedKeys:
    """Pinned public keys by ``kid``: the only keys a verifier ever uses.

    Duplicate kids are refused outright, because "the first match wins" lets whoever
    controls the order of a JWK Set choose the key.
    """

    def __init__(self, keys: Iterable[VerificationKey] = ()) -> None:
        self._keys: dict[str, VerificationKey] = {}
        for key in keys:
            if not KID_PATTERN.fullmatch(key.kid):
                raise KeyMaterialError(f"kid {key.kid!r} is not a plain identifier")
            if key.kid in self._keys:
                raise KeyMaterialError(f"duplicate kid {key.kid!r}")
            self._keys[key.kid] = key

    @classmethod
    def from_json(cls, document: str | bytes | Mapping[str, Any]) -> TrustedKeys:
        """Load a JWK Set (``{"keys": [...]}``) or a single public JWK."""
        value = strict_json.loads(document) if isinstance(document, str | bytes) else document
        if not isinstance(value, Mapping):
            raise KeyMaterialError("a JWK or JWK Set must be a JSON object")
        if "keys" in value:
            keys = value["keys"]
            if not isinstance(keys, list) or not keys:
                raise KeyMaterialError("a JWK Set needs a non-empty 'keys' array")
            return cls(verification_key_from_jwk(jwk) for jwk in keys)
        return cls([verification_key_from_jwk(value)])

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TrustedKeys:
        return cls.from_json(Path(path).read_bytes())

    def get(self, kid: str, *, at: datetime | None = None) -> VerificationKey | None:
        """The key for ``kid`` if it is pinned and, when ``at`` is given, not yet expired."""
        key = self._keys.get(kid)
        if key is None or (at is not None and not key.valid_at(at)):
            return None
        return key

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __iter__(self) -> Iterator[VerificationKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"TrustedKeys({sorted(self._keys)!r})"

    def to_jwks(self) -> dict[str, list[dict[str, str]]]:
        return {"keys": [key.to_jwk() for key in self._keys.values()]}


def verification_key_from_jwk(jwk: Any) -> VerificationKey:
    """One pinned public key from a JWK, refusing anything outside the signing profile."""
    if not isinstance(jwk, Mapping):
        raise KeyMaterialError("a JWK must be a JSON object")
    kty = jwk.get("kty")
    if kty == "oct":
        raise KeyMaterialError("symmetric (kty oct) keys are never trusted")
    if "d" in jwk:
        raise KeyMaterialError("a trusted key must be public; this JWK holds private material")
    if "use" in jwk and jwk["use"] != "sig":
        raise KeyMaterialError(f"key use {jwk['use']!r} is not 'sig'")
    key_ops = jwk.get("key_ops")
    if "key_ops" in jwk and (not isinstance(key_ops, list) or "verify" not in key_ops):
        raise KeyMaterialError("key_ops does not allow 'verify'")
    kid = jwk.get("kid")
    if "kid" in jwk and (not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid)):
        raise KeyMaterialError("a JWK's kid must be a plain string")
    public_key = public_key_from_jwk(jwk)
    alg = algorithm_of(public_key)
    if "alg" in jwk and jwk["alg"] != alg:
        raise KeyMaterialError(f"JWK alg {jwk['alg']!r} does not match its key type ({alg})")
    return VerificationKey(kid=check_kid(kid, public_key), alg=alg, public_key=public_key)
