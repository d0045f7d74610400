"""Signed tree heads: the coordinator's signed statement of its ledger's Merkle tree.

A signed tree head (STH, after RFC 9162 section 4.10) is a compact JWS, ``typ``
``ledger-tree-head+jwt``, EdDSA, ``kid`` the signer's RFC 7638 thumbprint, whose claims are::

    {"iss": "coordinator", "tree_size": 42, "root_hash": "<64 hex>", "issued_at": "...Z"}

``root_hash`` is the RFC 9162 root over the first ``tree_size`` events, whose leaf ``i``
(from 0) is ``SHA-256(0x00 || bytes(hash of event i + 1))``. Every head the coordinator
signs is kept in ``tree_heads`` (origin ``signed``); ``audit verify`` checks each one
against the tree it walks, so truncating or rewriting history under a kept head shows.
Heads of *other* logs that the coordinator was shown (origin ``witnessed``) are kept by
:meth:`TreeHeadStore.witness` once the caller has verified them with the key it pins,
under their ``signer``: the RFC 7638 thumbprint computed from that key. A witnessed
head's ``jws`` is the statement that states it: a signed tree head, or a receipt stating
its issuer's log size and root (:mod:`agent_cards.transparency.logged`, which reads
either back). They are read
back by signer (:meth:`TreeHeadStore.witnessed`), never by the ``log_id`` a head states:
an agent can write any log name into a head it signs, but only its own key verifies it,
so a head it signed is filed under its key and no other agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import Connection, Engine, select

from agent_cards.clock import utc_now
from agent_cards.jws import segment_json
from agent_cards.transparency import merkle
from agent_cards.transparency.heads import TREE_HEAD_TYP, Head, head_from
from agent_cards.transparency.statements import StatementInvalid
from coordinator.audit.log.events import timestamp
from coordinator.audit.log.signing import (
    public_jwk,
    public_key_of,
    sign,
    thumbprint,
    verified_claims,
)
from coordinator.errors import LedgerError, UsageError
from coordinator.storage import driver
from coordinator.storage.engine import write_transaction, writer_of
from coordinator.storage.schema import tree_heads

SIGNED, WITNESSED = "signed", "witnessed"
TreeHead = Head
"""A verified (or, from our own table, stored) signed tree head: the shared head format."""


def _from_claims(claims: Mapping[str, Any], kid: str, jws: str) -> TreeHead:
    try:
        return head_from(claims, kid, jws)
    except StatementInvalid as exc:
        raise LedgerError(str(exc), exc.reason) from None


def sign_tree_head(
    tree_size: int,
    root: bytes,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    now: datetime | None = None,
) -> TreeHead:
    """Sign ``(tree_size, root)`` now."""
    claims = {
        "iss": issuer,
        "tree_size": tree_size,
        "root_hash": root.hex(),
        "issued_at": timestamp(now or utc_now()),
    }
    kid = thumbprint(public_jwk(private_key))
    return _from_claims(claims, kid, sign(claims, private_key, TREE_HEAD_TYP))


def verify_tree_head(jws: str, key: Ed25519PublicKey | Mapping[str, Any]) -> TreeHead:
    """The head ``jws`` states, if ``key`` signed it; else ``head_invalid``."""
    if not isinstance(jws, str):
        raise LedgerError("a signed tree head is a compact JWS", "head_invalid")
    claims = verified_claims(jws, key, TREE_HEAD_TYP)
    return _from_claims(claims, public_key_of(key)[1], jws)


def key_for(jws: str, keys: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JWK of JWK Set ``keys`` whose thumbprint is the ``kid`` of ``jws``, if any."""
    kid = header_kid(jws)
    for jwk in keys.get("keys", []):
        try:
            if isinstance(jwk, Mapping) and thumbprint(jwk) == kid:
                return {**jwk, "kid": kid}
        except (KeyError, TypeError, ValueError):
            continue
    return None


def header_kid(jws: str) -> str | None:
    """The ``kid`` of a compact JWS's protected header, unverified (to pick the key)."""
    try:
        header = segment_json(jws, 0)
    except (ValueError, AttributeError):
        return None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None


def read_unverified(jws: str) -> TreeHead:
    """What a kept head's JWS states, without its signature checked (its key retired)."""
    try:
        claims = segment_json(jws, 1)
    except (ValueError, AttributeError):
        raise LedgerError("a tree head is not a compact JWS", "head_invalid") from None
    if not isinstance(claims, dict):
        raise LedgerError("a tree head's payload is not a JSON object", "head_invalid")
    return _from_claims(claims, header_kid(jws) or "", jws)


def verify_with_jwks(jws: str, keys: Mapping[str, Any]) -> TreeHead:
    """:func:`verify_tree_head` with the key of JWK Set ``keys`` that ``jws`` names."""
    key = key_for(jws, keys)
    if key is None:
        raise LedgerError("the tree head is signed by a key not in the JWK Set", "untrusted_key")
    return verify_tree_head(jws, key)


def consistent(old: TreeHead, new: TreeHead, proof: list[bytes]) -> bool:
    """True when ``proof`` shows ``new`` extends ``old`` (equal sizes: equal roots)."""
    return merkle.verify_consistency(old.tree_size, new.tree_size, old.root, new.root, proof)


def head_row(head: TreeHead, log_id: str, origin: str, signer: str) -> Callable[[Connection], None]:
    """Writes ``head`` as a row of ``tree_heads`` on the connection it is given: alone
    (:class:`TreeHeadStore`) or with a durable point's other rows (a witnessed head).
    ``signer`` is the thumbprint computed from the key that verified (or made) it."""
    row = {**head.as_dict(), "log_id": log_id, "origin": origin, "signer": signer}
    row.pop("iss")
    row["recorded_at"] = timestamp(utc_now())

    def write(connection: Connection) -> None:
        driver.execute(connection, driver.insert_sql(tree_heads.name, row), row)

    return write


class TreeHeadStore:
    """The ``tree_heads`` table: heads signed here, and heads of other logs witnessed."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _add(self, head: TreeHead, log_id: str, origin: str, signer: str) -> TreeHead:
        row = head_row(head, log_id, origin, signer)

        def add() -> None:  # through the process's writer: no two writers queue on the lock
            with write_transaction(self.engine) as connection:
                row(connection)

        writer_of(self.engine).call(add)
        return head

    def keep(self, head: TreeHead) -> TreeHead:
        """Keep a head this coordinator signed over its own ledger (its ``kid`` is the
        thumbprint :func:`sign_tree_head` computed from our key)."""
        return self._add(head, head.iss, SIGNED, head.kid)

    def witness(self, head: TreeHead, signer: str) -> TreeHead:
        """Keep the head of another service's log, already verified by the caller with
        the key it pins for that service, whose computed thumbprint is ``signer``."""
        return self._add(head, head.iss, WITNESSED, signer)

    def _heads(self, origin: str, signers: Collection[str] | None) -> list[TreeHead]:
        c = tree_heads.c
        query = select(tree_heads).where(c.origin == origin).order_by(c.tree_size, c.id)
        if signers is not None:
            query = query.where(c.signer.in_(sorted(signers)))
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [
            TreeHead(
                row["log_id"],
                int(row["tree_size"]),
                row["root_hash"],
                row["issued_at"],
                row["kid"],
                row["jws"],
            )
            for row in rows
        ]

    def signed(self) -> list[TreeHead]:
        """Every head signed over this ledger, smallest tree first."""
        return self._heads(SIGNED, None)

    def witnessed(self, signers: Collection[str]) -> list[TreeHead]:
        """The heads of other logs this coordinator was shown that verified with a key
        of thumbprint in ``signers`` (one agent's pinned keys), smallest first."""
        return self._heads(WITNESSED, signers)

    def latest_signed(self) -> TreeHead | None:
        heads = self.signed()
        return max(heads, key=lambda head: (head.tree_size, head.issued_at)) if heads else None


def named_head(engine: Engine, head: str | int, keys: Mapping[str, Any]) -> TreeHead:
    """The signed tree head ``head`` names, a compact JWS or the size of a head kept in
    the ledger behind ``engine``, verified with ``keys``; a :class:`UsageError` when no
    head of that size is kept or it does not verify."""
    if isinstance(head, int):
        kept = [h for h in TreeHeadStore(engine).signed() if h.tree_size == head]
        if not kept:
            raise UsageError(f"no signed tree head of size {head} is kept", "unknown_head")
        head = kept[-1].jws
    try:
        return verify_with_jwks(head, keys)
    except LedgerError as exc:
        raise UsageError(f"the tree head does not verify: {exc}", exc.reason) from None
