"""The proof that whoever asks for a child token holds the key its parent was minted for.

A token exchange (:mod:`coordinator.authority.exchange`) carries, as its RFC 8693
``actor_token``, a compact JWS the requester signs with its own card-signing key:

* protected header exactly ``{"alg", "kid", "typ": "chain-proof+jwt"}``;
* claims ``iss`` (the requester's identity: the RFC 9278 thumbprint URI of the signing
  key, equal to the parent token's ``aud``), ``aud`` (the owner's issuer identifier),
  ``iat``, ``exp`` (at most :data:`PROOF_LIFETIME` seconds after ``iat``), ``jti`` (used
  once) and ``req``, the digest of every other parameter of the request
  (:func:`contracts.chain.request_binding`), so the proof is good for this one request only.

The key is looked up among the keys the operator pinned for the registered agents, by
``kid``; its thumbprint URI must be the parent's ``aud``: a token copied off the wire is
useless without its holder's private key. A ``jti`` seen before within its lifetime is
refused (``proof_replayed``). The key that proved the exchange is the one the child is
bound to (its ``cnf.jkt``, RFC 9449): the child, too, is useless off the wire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_cards.identity import THUMBPRINT_URI_PREFIX, identity_of
from agent_cards.keys import ALGORITHMS, b64url_decode
from agent_cards.signatures.primitive import verify
from agent_cards.trusted import VerificationKey
from contracts import strict_json
from contracts.chain import PROOF_LIFETIME, PROOF_TYP
from coordinator.errors import FederationError

LEEWAY = 30


class ExchangeRefused(FederationError):
    """A token exchange refused: ``reason`` stable, ``status`` the HTTP status (4xx)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message, reason)
        self.status = status


class ProofReplayGuard:
    """The ``jti`` of every proof accepted, kept until it could no longer be accepted."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def claim(self, jti: str, until: int, now: int) -> None:
        with self._lock:
            for old in [k for k, v in self._seen.items() if v < now]:
                del self._seen[old]
            if jti in self._seen:
                raise ExchangeRefused(401, "proof_replayed", "this proof was used before")
            self._seen[jti] = until + LEEWAY


@dataclass(frozen=True)
class Proven:
    """An accepted proof: its ``jti`` (the owner keeps it with the hop it grants) and the
    RFC 7638 thumbprint of the holder's key that signed it (the child's ``cnf.jkt``)."""

    jti: str
    jkt: str


def _invalid(message: str) -> ExchangeRefused:
    return ExchangeRefused(401, "proof_invalid", message)


def _segment(text: str) -> dict[str, Any]:
    try:
        value = strict_json.loads(b64url_decode(text).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise _invalid("a proof segment is not a base64url JSON object") from None
    if not isinstance(value, dict):
        raise _invalid("a proof segment is not a JSON object")
    return value


def verify_proof(
    proof: str,
    *,
    holder: str,
    issuer: str,
    binding: str,
    keys: Iterable[VerificationKey],
    replay: ProofReplayGuard,
    now: int | None = None,
) -> Proven:
    """Accept ``proof`` as ``holder``'s for the request whose binding is ``binding`` and
    return what it proved (:class:`Proven`), or raise
    :class:`ExchangeRefused` (``proof_invalid``, ``proof_not_holder``, ``proof_replayed``).
    ``keys``: every key pinned for a registered agent."""
    at = int(time.time()) if now is None else now
    parts = proof.split(".")
    if len(parts) != 3 or not all(parts):
        raise _invalid("the proof is not a compact JWS")
    header, claims = _segment(parts[0]), _segment(parts[1])
    if set(header) != {"alg", "kid", "typ"} or header["typ"] != PROOF_TYP:
        raise _invalid(f"the proof header is exactly alg, kid and typ {PROOF_TYP}")
    key = next((k for k in keys if k.kid == header["kid"]), None)
    if key is None or header["alg"] not in ALGORITHMS or header["alg"] != key.alg:
        raise _invalid("the proof's key is no pinned key of a registered agent")
    if identity_of(key) != holder:
        raise ExchangeRefused(
            401, "proof_not_holder", "the proof is signed by a key the token was not minted for"
        )
    _check_signature(parts, key)
    _check_claims(claims, holder=holder, issuer=issuer, binding=binding, now=at)
    replay.claim(claims["jti"], claims["exp"], at)
    # identity_of(key) is the holder: the key's kid is its thumbprint (agent_cards.identity)
    return Proven(jti=claims["jti"], jkt=identity_of(key).removeprefix(THUMBPRINT_URI_PREFIX))


def _check_signature(parts: list[str], key: VerificationKey) -> None:
    signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
    try:
        verified = verify(key, signing_input, b64url_decode(parts[2]))
    except ValueError:
        verified = False
    if not verified:
        raise _invalid("the proof's signature does not verify")


def _check_claims(
    claims: Mapping[str, Any], *, holder: str, issuer: str, binding: str, now: int
) -> None:
    times = [claims.get(name) for name in ("iat", "exp")]
    if not all(type(value) is int for value in times) or not isinstance(claims.get("jti"), str):
        raise _invalid("the proof needs integer iat and exp and a string jti")
    iat, exp = claims["iat"], claims["exp"]
    if claims.get("iss") != holder or claims.get("aud") != issuer:
        raise _invalid("the proof's iss must be the token's holder and its aud this owner")
    if not 0 < exp - iat <= PROOF_LIFETIME or iat > now + LEEWAY or exp <= now - LEEWAY:
        raise _invalid(f"the proof must be fresh and live at most {PROOF_LIFETIME} seconds")
    if claims.get("req") != binding:
        raise _invalid("the proof is bound to another request")
