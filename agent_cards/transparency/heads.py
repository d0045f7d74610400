"""Signed tree heads of a log (after RFC 9162 section 4.10), by a service's card key.

A head is a signed statement (:mod:`agent_cards.transparency.statements`), ``typ``
``ledger-tree-head+jwt``, whose claims are exactly::

    {"iss": "<the log's owner>", "tree_size": 42, "root_hash": "<64 hex>", "issued_at": "...Z"}

the format of the coordinator's heads (docs/audit-bundle.md), so one verifier reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent_cards.keys import SigningKey
from agent_cards.transparency import merkle
from agent_cards.transparency.statements import (
    StatementInvalid,
    sign_statement,
    unverified_header,
    verify_statement,
)
from agent_cards.trusted import TrustedKeys

TREE_HEAD_TYP = "ledger-tree-head+jwt"
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Head:
    """What a signed tree head states, and the JWS that states it."""

    iss: str
    tree_size: int
    root_hash: str
    issued_at: str
    kid: str
    jws: str

    @property
    def root(self) -> bytes:
        return bytes.fromhex(self.root_hash)

    def as_dict(self) -> dict[str, Any]:
        return {
            "iss": self.iss,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "issued_at": self.issued_at,
            "kid": self.kid,
            "jws": self.jws,
        }


def is_hash(value: Any) -> bool:
    """64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def now_text(now: datetime | None = None) -> str:
    """UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (the ledgers' timestamps)."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def head_from(claims: Mapping[str, Any], kid: str, jws: str) -> Head:
    """The head ``claims`` state; ``head_invalid`` when one is missing or mistyped."""
    size, root = claims.get("tree_size"), claims.get("root_hash")
    if not (
        isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
        and is_hash(root)
        and isinstance(claims.get("issued_at"), str)
        and isinstance(claims.get("iss"), str)
    ):
        raise StatementInvalid(
            "head_invalid", "a signed tree head needs iss, tree_size, root_hash and issued_at"
        )
    return Head(str(claims["iss"]), size, str(root), str(claims["issued_at"]), kid, jws)


def sign_head(
    size: int, root: bytes, key: SigningKey, issuer: str, now: datetime | None = None
) -> Head:
    """Sign ``(size, root)`` of ``issuer``'s log now."""
    claims = {"iss": issuer, "tree_size": size, "root_hash": root.hex(), "issued_at": now_text(now)}
    return head_from(claims, key.kid, sign_statement(claims, key, TREE_HEAD_TYP))


def verify_head(jws: Any, keys: TrustedKeys, *, issuer: str | None = None) -> Head:
    """The head ``jws`` states if one of ``keys`` signed it in its own name (``iss`` the
    key's identity, or ``issuer`` when the caller chose ``keys`` by that name); else
    :class:`StatementInvalid`."""
    claims = verify_statement(jws, keys, TREE_HEAD_TYP, issuer=issuer)
    return head_from(claims, str(unverified_header(jws)["kid"]), jws)


def verify_head_signer(
    jws: Any, keys: TrustedKeys, *, issuer: str | None = None
) -> tuple[Head, str]:
    """:func:`verify_head`, and who signed it: the RFC 7638 thumbprint computed from the
    key of ``keys`` that verified the signature (never a label the head states). What a
    witness keys the head by. A pinned key's ``kid`` is that thumbprint, computed from
    the key when it was pinned (:class:`~agent_cards.trusted.VerificationKey`, frozen)."""
    head = verify_head(jws, keys, issuer=issuer)
    key = keys.get(head.kid)
    if key is None:  # verify_head found it: only a changed ``keys`` gets here
        raise StatementInvalid("untrusted_key", "the verifying key is no longer pinned")
    return head, key.kid


def extends(old: Head, new: Head, proof: list[bytes]) -> bool:
    """True when ``proof`` shows ``new`` extends ``old`` (equal sizes: equal roots)."""
    return merkle.verify_consistency(old.tree_size, new.tree_size, old.root, new.root, proof)
