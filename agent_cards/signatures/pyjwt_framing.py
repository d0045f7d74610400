"""PyJWT with this project's signature primitive, for the JWS that PyJWT frames.

Some compact JWS are read or written by PyJWT: the ledger's heads (claims checked by
PyJWT's JWT rules), pushed notifications, card signatures and ES256 statements (its
framing and header checks). :data:`JWS` and :data:`JWT` are PyJWT objects whose EdDSA and
ES256 algorithm objects call :mod:`agent_cards.signatures.primitive` instead of their
own: every byte and check stays PyJWT's, only the signature is made and checked there.
"""

from __future__ import annotations

from typing import Any, cast

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from jwt.algorithms import Algorithm as PyJWTAlgorithm

from agent_cards.keys import SigningKey
from agent_cards.signatures.primitive import sign, sign_ed25519, verify, verify_ed25519
from agent_cards.trusted import VerificationKey

__all__ = ["JWS", "JWT", "decode_complete"]


class _Primitive(PyJWTAlgorithm):
    """One pinned algorithm as PyJWT's algorithm object: PyJWT frames the JWS, the
    signature is made and checked by :func:`sign` and :func:`verify`. Keys are the
    project's key objects, or a bare Ed25519 key (the ledger's)."""

    def __init__(self, alg: str) -> None:
        self.alg = alg

    def prepare_key(self, key: Any) -> Any:
        if isinstance(key, SigningKey | VerificationKey) and key.alg == self.alg:
            return key
        if self.alg == "EdDSA" and isinstance(key, Ed25519PrivateKey | Ed25519PublicKey):
            return key
        raise jwt.InvalidKeyError(f"not a {self.alg} key")

    def sign(self, msg: bytes, key: Any) -> bytes:
        if isinstance(key, Ed25519PrivateKey):
            return sign_ed25519(key, msg)
        if not isinstance(key, SigningKey):
            raise jwt.InvalidKeyError("a public key cannot sign")
        return sign(key, msg)

    def verify(self, msg: bytes, key: Any, sig: bytes) -> bool:
        if isinstance(key, Ed25519PublicKey):
            return verify_ed25519(key, msg, sig)
        if isinstance(key, SigningKey):
            key = key.verification_key()
        return verify(key, msg, sig)

    @staticmethod
    def to_jwk(key_obj: Any, as_dict: bool = False) -> Any:
        raise NotImplementedError("keys are exported by agent_cards.jwk")

    @staticmethod
    def from_jwk(jwk: str | dict[str, Any]) -> Any:
        raise NotImplementedError("keys are read by agent_cards.jwk")


def _pyjws() -> jwt.PyJWS:
    jws = jwt.PyJWS(algorithms=[])
    for alg in ("EdDSA", "ES256"):
        jws.register_algorithm(alg, _Primitive(alg))
    return jws


class _PyJWT(jwt.PyJWT):
    """PyJWT's JWT rules (claims, header, encoding) over :data:`JWS`."""

    def __init__(self) -> None:
        super().__init__()
        self._jws = JWS


JWS = _pyjws()
JWT = _PyJWT()


def decode_complete(compact: str, key: VerificationKey) -> dict[str, Any]:
    """PyJWS's ``decode_complete`` of ``compact`` by ``key`` with its one algorithm: the
    framing and header checks PyJWT's, the signature checked by :func:`verify`."""
    decoded: dict[str, Any] = JWS.decode_complete(compact, cast(Any, key), algorithms=[key.alg])
    return decoded
