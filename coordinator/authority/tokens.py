"""Minting delegation tokens: a narrowed :class:`~contracts.grant.Grant` signed as a compact JWS.

The protected header is exactly ``{"alg", "kid", "typ": "delegation+jwt"}``; nothing that
would tell a verifier where to look for keys is ever added. Narrowing happens before this
step, in :func:`contracts.grant.narrow`; this module only signs what it is given, after
checking that it is a complete grant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_cards.keys import SigningKey, b64url_encode
from agent_cards.signatures.primitive import signed_compact
from contracts import strict_json
from contracts.grant import Grant

DELEGATION_TOKEN_TYPE = "delegation+jwt"


def mint_token(
    child_claims: Grant | Mapping[str, Any],
    key: SigningKey,
    claims: Mapping[str, Any] | None = None,
) -> str:
    """The compact JWS of ``child_claims`` signed with ``key``.

    Raw claims are validated as a :class:`Grant` first, so an incomplete or mistyped
    grant is refused here (pydantic ``ValidationError``) rather than by every verifier.
    ``claims``: the grant's :meth:`~contracts.grant.Grant.claims` when the caller made
    them already (a minted grant's digest is taken over the same dict).
    """
    grant = child_claims if isinstance(child_claims, Grant) else Grant.model_validate(child_claims)
    header = {"alg": key.alg, "kid": key.kid, "typ": DELEGATION_TOKEN_TYPE}
    signed = grant.claims() if claims is None else claims
    return signed_compact(f"{_segment(header)}.{_segment(signed)}", key)


def _segment(value: Mapping[str, Any]) -> str:
    return b64url_encode(strict_json.dumps(dict(value)))


def sign_jws(claims: Mapping[str, Any], key: SigningKey, typ: str) -> str:
    """A compact JWS of ``claims`` of type ``typ`` (header exactly alg, kid, typ)."""
    header = {"alg": key.alg, "kid": key.kid, "typ": typ}
    return signed_compact(f"{_segment(header)}.{_segment(claims)}", key)
