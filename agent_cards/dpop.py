"""Holder proofs (RFC 9449 DPoP) as the presenting side makes them: the one proof maker.

A token that names its holder's key (``cnf.jkt``, the key's RFC 7638 thumbprint) is
presented with one ``DPoP`` header per request: a compact JWS whose header is exactly
``typ`` (``dpop+jwt``), ``alg`` and ``jwk`` (the holder's public key), and whose claims
are ``jti`` (fresh), ``htm`` (the method), ``htu`` (the URL without query or fragment),
``iat`` and ``ath`` (:func:`token_hash`). The coordinator proves the tokens it holds
(:mod:`coordinator.authority.holder`); a member proves the child tokens it was minted by
exchange (:func:`member_kit.trust.chain.delegate`); the member kit checks both in its one
verifier (:mod:`member_kit.trust.holder_proof`).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agent_cards.jws import b64url_encode
from agent_cards.keys import SigningKey
from agent_cards.signatures.primitive import signed_compact
from contracts import strict_json

PROOF_TYPE = "dpop+jwt"
PROOF_HEADER = "DPoP"


def token_hash(token: str) -> str:
    """``ath``: base64url SHA-256 of the token's ASCII bytes."""
    return b64url_encode(hashlib.sha256(token.encode("ascii")).digest())


def target_uri(url: str) -> str:
    """``htu``: ``url`` without query or fragment."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def proof(holder: SigningKey, method: str, url: str, token: str, now: int | None = None) -> str:
    """A fresh proof by ``holder`` for one request presenting ``token`` (``url`` as the
    receiving member publishes it)."""
    claims = {
        "jti": uuid.uuid4().hex,
        "htm": method,
        "htu": target_uri(url),
        "iat": int(time.time()) if now is None else now,
        "ath": token_hash(token),
    }
    return sign_jws_with_jwk(claims, holder, PROOF_TYPE)


def sign_jws_with_jwk(claims: Mapping[str, Any], key: SigningKey, typ: str) -> str:
    """A compact JWS of ``claims`` whose header carries the public key itself (``typ``,
    ``alg``, ``jwk``): a proof of possession, checked against a thumbprint named elsewhere."""
    header = {"typ": typ, "alg": key.alg, "jwk": key.public_jwk()}
    return signed_compact(f"{_segment(header)}.{_segment(claims)}", key)


def _segment(value: Mapping[str, Any]) -> str:
    return b64url_encode(strict_json.dumps(dict(value)))
