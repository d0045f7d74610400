"""Key succession: a key an agent is known by vouches for the key that follows it.

An agent that rotates its card key announces the next key before it signs with it: the
key it is pinned by signs a statement (:mod:`agent_cards.transparency.statements`),
``typ`` :data:`SUCCESSION_TYP`, claims::

    {"iss": "<identity of the old key>", "successor": {<public JWK of the new key>},
     "issued_at": "...Z"}

Like every statement it speaks only for the key that verified it (``iss`` is that key's
identity), so whoever pins the old key can adopt the new one without asking anybody, and
no one else can make it adopt anything: a statement by a key not pinned is
``untrusted_key``, one naming another issuer ``issuer_mismatch``. An auditor holding only
the old key follows the same statements to check what the new key signed later.

The JWK Set an agent serves carries them as the extra member ``successions`` (RFC 7517
lets a set have members a reader ignores), and so does the receipts extension's metadata
of a task whose receipt was signed while a successor waited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from agent_cards.identity import identity_of
from agent_cards.keys import KeyMaterialError, KeySet, SigningKey
from agent_cards.transparency.statements import (
    StatementInvalid,
    sign_statement,
    verify_statement,
)
from agent_cards.trusted import TrustedKeys, VerificationKey, verification_key_from_jwk

SUCCESSION_TYP = "key-succession+jwt"
SUCCESSIONS = "successions"
# A chain longer than this is not followed (each link is one rotation).
MAX_SUCCESSIONS = 16


def sign_succession(old: SigningKey, new: VerificationKey, now: datetime | None = None) -> str:
    """``old``'s statement that ``new`` follows it."""
    issued = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    claims = {"iss": identity_of(old.verification_key()), "successor": new.to_jwk()}
    return sign_statement({**claims, "issued_at": issued}, old, SUCCESSION_TYP)


def successions_of(keys: KeySet, now: datetime | None = None) -> list[str]:
    """The statements a key set publishes: each earlier key still verifying vouches for
    the active key, and the active key for the published one."""
    current = keys.effective(now)
    active = current.active.verification_key()
    found = [sign_succession(old.key, active, now) for old in current.retired]
    if current.published is not None:
        found.append(sign_succession(current.active, current.published.key.verification_key()))
    return found


def verify_succession(jws: Any, keys: TrustedKeys) -> VerificationKey:
    """The successor ``jws`` names, if a key of ``keys`` signed it in its own name; else
    :class:`StatementInvalid` (the reasons of ``verify_statement``, or
    ``succession_invalid`` for a successor that is no public signing key)."""
    claims = verify_statement(jws, keys, SUCCESSION_TYP)
    try:
        return verification_key_from_jwk(claims.get("successor"))
    except (KeyMaterialError, ValueError, TypeError) as exc:
        raise StatementInvalid("succession_invalid", f"the successor is no key: {exc}") from None


def followed(keys: TrustedKeys, statements: Iterable[Any]) -> tuple[TrustedKeys, list[str]]:
    """``keys`` and every key a chain of ``statements`` leads to from them, with the
    statements that were followed (in the order followed). Statements by no key reached
    are left out: they vouch for nothing here."""
    pending = [s for s in statements if isinstance(s, str)][:MAX_SUCCESSIONS]
    known = {key.kid: key for key in keys}
    used: list[str] = []
    progress = True
    while progress:
        progress = False
        for jws in list(pending):
            try:
                successor = verify_succession(jws, TrustedKeys(known.values()))
            except StatementInvalid:
                continue
            pending.remove(jws)
            used.append(jws)
            progress = True
            known.setdefault(successor.kid, successor)
    return TrustedKeys(known.values()), used


def successions_in(document: Mapping[str, Any] | None) -> list[Any]:
    """The statements a JWK Set or a receipts extension's metadata carries ([] if none)."""
    found = (document or {}).get(SUCCESSIONS)
    return list(found) if isinstance(found, list) else []
