"""Holder-bound tokens (RFC 9449 DPoP): a token that names its holder's key is usable
only with a fresh proof, by that key, over the very request.

A token whose claims carry ``cnf: {"jkt": <RFC 7638 thumbprint>}`` (RFC 7800, RFC 9449
section 6) is accepted only when the request carries one ``DPoP`` header: a compact JWS
whose header is exactly ``typ`` (``dpop+jwt``), ``alg`` (EdDSA or ES256) and ``jwk``
(the holder's public key, no private member), signed by that key, whose RFC 7638
thumbprint is ``jkt``, and whose claims are ``jti`` (a string, taken once per key within
the proof's lifetime), ``htm`` (the request's method), ``htu`` (the request's URL as
the member publishes it: its public origin and the path, no query, no fragment; for the
gRPC binding ``POST`` and ``/{service}/{method}``), ``iat`` (at most
:data:`MAX_PROOF_AGE_SECONDS` old, at most the leeway ahead) and ``ath`` (base64url
SHA-256 of the token's ASCII). A token without ``cnf`` is not affected. A stolen token,
or one copied from a proof bundle, is useless without the holder's private key; a
captured proof is useless for another request, another token, later, or a second time.

The ``(jkt, jti)`` record is a :class:`ProofReplay`: :class:`ProofReplayGuard` in memory,
or :class:`~member_kit.trust.sql_replay.SQLProofReplayGuard` in the member's database,
so a proof seen before a restart (or by another replica) is still refused.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from agent_cards.dpop import PROOF_TYPE, token_hash
from agent_cards.jwk import algorithm_of, public_key_from_jwk, thumbprint_of
from agent_cards.keys import ALGORITHMS
from agent_cards.trusted import VerificationKey
from contracts.grant import Grant
from member_kit.trust import token_format
from member_kit.trust.denials import DenialReason as R
from member_kit.trust.denials import deny

PROOF_HEADER = "dpop"
MAX_PROOF_AGE_SECONDS = 60
MAX_PROOF_BYTES = 4096
_HEADER_MEMBERS = frozenset({"typ", "alg", "jwk"})
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "k"})
_KEY_MEMBERS = ("kty", "crv", "x", "y")


@dataclass(frozen=True)
class HolderRequest:
    """What a proof is checked against: the ``DPoP`` header (None: absent; several are
    refused by the caller), the method and the URL as the member publishes it."""

    proof: str | None
    method: str
    url: str


def request_url(public_base_url: str, path: str) -> str:
    """``htu`` as this member checks it: its public origin and the request's path."""
    parts = urlsplit(public_base_url)
    return f"{parts.scheme}://{parts.netloc}{path}"


class ProofReplay(Protocol):
    def take(self, jkt: str, jti: str, until: int, now: int) -> bool:
        """Record ``(jkt, jti)`` until ``until``; ``False`` if it was already recorded.
        Raises :class:`~member_kit.trust.replay.ReplayGuardUnavailable` when it cannot."""
        ...


class ProofReplayGuard:
    """Each ``(jkt, jti)`` taken once while a proof with it could still be accepted."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        self._expiries: list[tuple[int, tuple[str, str]]] = []

    def take(self, jkt: str, jti: str, until: int, now: int) -> bool:
        while self._expiries and self._expiries[0][0] < now:
            self._seen.discard(heapq.heappop(self._expiries)[1])
        if (jkt, jti) in self._seen:
            return False
        self._seen.add((jkt, jti))
        heapq.heappush(self._expiries, (until, (jkt, jti)))
        return True


def check_holder(
    grant: Grant,
    token: str,
    request: HolderRequest | None,
    now: int,
    leeway: int,
    replay: ProofReplay,
) -> None:
    """Nothing for a token without ``cnf``; else the proof as the module says, or a
    denial (``holder_proof_missing``, ``holder_proof_invalid``, ``holder_key_mismatch``,
    ``holder_proof_mismatch``, ``holder_proof_stale``, ``holder_proof_replayed``)."""
    if grant.cnf is None:
        return
    if request is None or not request.proof:
        raise deny(R.HOLDER_PROOF_MISSING, "the token is bound to a holder key")
    claims = _verified_proof(request.proof, grant.cnf.jkt)
    if claims.get("htm") != request.method or claims.get("htu") != request.url:
        raise deny(R.HOLDER_PROOF_MISMATCH, "htm or htu is not this request")
    if claims.get("ath") != token_hash(token):
        raise deny(R.HOLDER_PROOF_MISMATCH, "ath is not this token's hash")
    iat, jti = claims.get("iat"), claims.get("jti")
    if not isinstance(iat, int) or isinstance(iat, bool) or not isinstance(jti, str) or not jti:
        raise deny(R.HOLDER_PROOF_INVALID, "iat must be an integer and jti a string")
    if not now - MAX_PROOF_AGE_SECONDS <= iat <= now + leeway:
        raise deny(R.HOLDER_PROOF_STALE, f"iat must be within {MAX_PROOF_AGE_SECONDS} s")
    if not replay.take(grant.cnf.jkt, jti[:256], iat + MAX_PROOF_AGE_SECONDS + leeway, now):
        raise deny(R.HOLDER_PROOF_REPLAYED)


def _verified_proof(proof: str, jkt: str) -> dict[str, Any]:
    if len(proof) > MAX_PROOF_BYTES or not token_format.TOKEN_SHAPE.fullmatch(proof):
        raise deny(R.HOLDER_PROOF_INVALID, "not a compact JWS")
    head, body, signature = proof.split(".")
    try:
        header = token_format.json_object(head)
        claims = token_format.json_object(body)
    except Exception:
        raise deny(R.HOLDER_PROOF_INVALID, "header or claims are not JSON objects") from None
    key = _proof_key(header)
    if key.kid != jkt:
        raise deny(R.HOLDER_KEY_MISMATCH, "the proof's key is not the one the token names")
    try:
        token_format.check_signature(f"{head}.{body}", signature, key)
    except Exception:
        raise deny(R.HOLDER_PROOF_INVALID, "the signature does not verify") from None
    return claims


def _proof_key(header: Mapping[str, Any]) -> VerificationKey:
    if set(header) != _HEADER_MEMBERS or header.get("typ") != PROOF_TYPE:
        raise deny(R.HOLDER_PROOF_INVALID, "the header must be exactly typ dpop+jwt, alg, jwk")
    jwk, alg = header.get("jwk"), header.get("alg")
    if not isinstance(jwk, dict) or _PRIVATE_MEMBERS & set(jwk) or alg not in ALGORITHMS:
        raise deny(R.HOLDER_PROOF_INVALID, "jwk must be a public key, alg EdDSA or ES256")
    members = tuple(jwk.get(name) for name in _KEY_MEMBERS)
    if not all(isinstance(value, str | None) for value in members):
        raise deny(R.HOLDER_PROOF_INVALID, "jwk members must be strings")
    key = _parsed_key(members)
    if key is None:
        raise deny(R.HOLDER_PROOF_INVALID, "jwk is not a supported public key")
    if key.alg != alg:
        raise deny(R.HOLDER_PROOF_INVALID, "alg is not the key's algorithm")
    return key


@functools.lru_cache(maxsize=1024)
def _parsed_key(members: tuple[str | None, ...]) -> VerificationKey | None:
    """The key the JWK members ``(kty, crv, x, y)`` spell, its kid computed from the key
    material (a holder sends many proofs with one key: parsed once)."""
    jwk = {name: value for name, value in zip(_KEY_MEMBERS, members, strict=True) if value}
    try:
        public_key = public_key_from_jwk(jwk)
        key_alg = algorithm_of(public_key)
    except Exception:
        return None
    return VerificationKey(kid=thumbprint_of(public_key), alg=key_alg, public_key=public_key)
