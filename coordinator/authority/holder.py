"""Holder-bound tokens from the presenting side (RFC 9449 DPoP).

A token minted with ``cnf.jkt`` (:func:`bound_to`) is usable only with a fresh proof per
request by the holder's key (:func:`agent_cards.dpop.proof`, the one proof maker, which
the member kit uses too for the children it was minted by exchange). The member checks
it in its one verifier (:mod:`member_kit.trust.holder_proof`).

The holder is the coordinator process that minted the token (its active signing key);
with ``FEDERATION_HOLDER_PROOF=1`` it binds the tokens it mints, and :func:`hold`
remembers each such token with its key until it expires, so that every request that
presents it gets a fresh proof (:func:`proof_headers`, called by
:meth:`coordinator.remote.wire.client.A2AClient.exchange` and ``stream_events`` for the HTTP
bindings, and by the gRPC transport's metadata). Nothing else needs to carry the key.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Mapping

from agent_cards.dpop import PROOF_HEADER, proof
from agent_cards.keys import SigningKey
from contracts.grant import Grant

HOLDER_PROOF_ENV = "FEDERATION_HOLDER_PROOF"

# token -> the key that must prove it, while it can be used; expiries in a heap
_held: dict[str, SigningKey] = {}
_expiries: list[tuple[int, str]] = []


def holder_proof_enabled() -> bool:
    return os.environ.get(HOLDER_PROOF_ENV, "") == "1"


def hold(token: str, key: SigningKey, exp: int) -> None:
    """Remember that requests presenting ``token`` must carry a proof by ``key``."""
    now = int(time.time())
    while _expiries and _expiries[0][0] < now:
        _held.pop(heapq.heappop(_expiries)[1], None)
    _held[token] = key
    heapq.heappush(_expiries, (exp + 60, token))


def proof_headers(headers: Mapping[str, str], method: str, url: str) -> dict[str, str]:
    """``{"DPoP": proof}`` when ``headers`` present a token this process holds, else {}."""
    authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = authorization.partition(" ")
    key = _held.get(token.strip()) if scheme.lower() == "bearer" else None
    return {PROOF_HEADER: proof(key, method, url, token.strip())} if key is not None else {}


def bound_to(grant: Grant, holder: SigningKey) -> Grant:
    """``grant`` naming ``holder``'s key (its RFC 7638 thumbprint, which is its kid)."""
    return bound_to_thumbprint(grant, holder.kid)


def bound_to_thumbprint(grant: Grant, jkt: str) -> Grant:
    """``grant`` naming the key whose RFC 7638 thumbprint is ``jkt`` (``cnf.jkt``)."""
    return Grant.model_validate({**grant.claims(), "cnf": {"jkt": jkt}})
