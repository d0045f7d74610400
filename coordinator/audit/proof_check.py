"""Check a proof bundle offline, step by step as docs/audit-bundle.md specifies.

The steps, each failing with its :class:`~coordinator.audit.verification.Break` reason:

1. shape (``malformed``);
2. keys: every JWK public, the tree head's key the trusted one when one is given
   (``malformed``, ``untrusted_key``);
3. the signed tree head (``head_invalid``);
4. every event: its hash is SHA-256 of its bytes (``hash_mismatch``), its record is this
   run's and at its place (``malformed``), consecutive events link (``prev_mismatch``),
   and its inclusion proof yields the head's root (``inclusion_invalid``);
5. tokens: each digest is the one an included ``grant.minted`` event records
   (``token_mismatch``);
6. receipts: each is the one an included ``handoff.receipt`` event keeps, and its
   signature verifies with the key its ``kid`` names (``receipt_invalid``).

docs/verifier/verify_bundle.py does the same with nothing of ours, and a test checks
that the two agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import jwt

from agent_cards.transparency import merkle
from agent_cards.transparency.heads import is_hash
from coordinator.audit.proofs import PROOF_FORMAT
from coordinator.audit.receipts import GRANT_EVENT, RECEIPT_EVENT, compact, protected_header
from coordinator.audit.signing import thumbprint
from coordinator.audit.tree_heads import TreeHead, key_for, verify_tree_head
from coordinator.audit.verification import Break, VerifyReport
from coordinator.errors import LedgerError

_GENESIS = "0" * 64


class _Failed(Exception):
    def __init__(self, seq: int, kind: Break, detail: str) -> None:
        super().__init__(detail)
        self.seq, self.kind, self.detail = seq, kind, detail


def _shape(bundle: Mapping[str, Any]) -> None:
    if bundle.get("format") != PROOF_FORMAT:
        raise _Failed(0, Break.MALFORMED, f"format is not {PROOF_FORMAT}")
    expected = {"run_id": str, "tree_head": str, "events": list, "tokens": list, "receipts": list}
    for name, kind in expected.items():
        if not isinstance(bundle.get(name), kind):
            raise _Failed(0, Break.MALFORMED, f"{name} is missing or not a {kind.__name__}")
    jwks = bundle.get("jwks")
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise _Failed(0, Break.MALFORMED, "jwks is not a JWK Set")
    if not bundle["events"]:
        raise _Failed(0, Break.MALFORMED, "the bundle has no events")
    for entry in bundle["events"]:
        if not (
            isinstance(entry, dict)
            and _is_seq(entry.get("seq"))
            and isinstance(entry.get("canonical"), str)
            and isinstance(entry.get("hash"), str)
            and isinstance(entry.get("inclusion_proof"), list)
            and all(is_hash(node) for node in entry["inclusion_proof"])
        ):
            raise _Failed(
                0, Break.MALFORMED, "an event is not {seq, hash, canonical, inclusion_proof}"
            )
    for entry in [*bundle["tokens"], *bundle["receipts"]]:
        if not isinstance(entry, dict) or not _is_seq(entry.get("seq")):
            raise _Failed(0, Break.MALFORMED, "a token or receipt entry has no seq")


def _is_seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _keys(bundle: Mapping[str, Any], trusted: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The key set to check the tree head with (only ``trusted``, when given)."""
    for jwk in bundle["jwks"]["keys"]:
        if not isinstance(jwk, dict) or "d" in jwk or "kid" not in jwk:
            raise _Failed(0, Break.MALFORMED, "a JWK is not a public key with a kid")
    if trusted is None:
        return bundle["jwks"]
    try:
        kid = thumbprint(trusted)
    except (KeyError, TypeError):
        raise _Failed(0, Break.UNTRUSTED_KEY, "the trusted key is not an OKP JWK") from None
    if key_for(bundle["tree_head"], {"keys": [trusted]}) is None:
        raise _Failed(
            0, Break.UNTRUSTED_KEY, f"the tree head is not signed by the trusted key {kid}"
        )
    return {"keys": [trusted]}


def _head(bundle: Mapping[str, Any], keys: Mapping[str, Any]) -> TreeHead:
    key = key_for(bundle["tree_head"], keys)
    if key is None:
        raise _Failed(0, Break.HEAD_INVALID, "the tree head's kid is not among the bundle's keys")
    try:
        head = verify_tree_head(bundle["tree_head"], key)
    except LedgerError as exc:
        raise _Failed(0, Break.HEAD_INVALID, str(exc)) from None
    if head.tree_size < 1:
        raise _Failed(0, Break.HEAD_INVALID, "the tree head is of an empty tree")
    return head


def _record(entry: Mapping[str, Any]) -> dict[str, Any]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise ValueError("duplicate member")
        return dict(pairs)

    try:
        record = json.loads(entry["canonical"], object_pairs_hook=unique)
    except ValueError as exc:
        raise _Failed(entry["seq"], Break.MALFORMED, f"the event is not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise _Failed(entry["seq"], Break.MALFORMED, "the event is not a JSON object")
    return record


def _events(bundle: Mapping[str, Any], head: TreeHead) -> dict[int, dict[str, Any]]:
    """Steps 4: each event's hash, record, link and inclusion; the records by seq."""
    records: dict[int, dict[str, Any]] = {}
    previous: tuple[int, str] | None = None
    for entry in bundle["events"]:
        seq = entry["seq"]
        if (previous is not None and seq <= previous[0]) or seq > head.tree_size:
            raise _Failed(seq, Break.MALFORMED, "events are not in order within the tree head")
        raw = hashlib.sha256(entry["canonical"].encode("utf-8")).digest()
        if raw.hex() != entry["hash"]:
            raise _Failed(seq, Break.HASH_MISMATCH, "the event does not match its hash")
        record = _record(entry)
        if record.get("seq") != seq or record.get("run_id") != bundle["run_id"]:
            raise _Failed(seq, Break.MALFORMED, "the event is not this run's, or not at its seq")
        if (
            previous is not None
            and previous[0] == seq - 1
            and record.get("prev_hash") != previous[1]
        ):
            raise _Failed(seq, Break.PREV_MISMATCH, f"prev_hash does not match event {seq - 1}")
        if seq == 1 and record.get("prev_hash") != _GENESIS:
            raise _Failed(seq, Break.PREV_MISMATCH, "the first event does not start the chain")
        proof = [bytes.fromhex(node) for node in entry["inclusion_proof"]]
        leaf = merkle.leaf_hash(raw)
        if not merkle.verify_inclusion(seq - 1, head.tree_size, leaf, proof, head.root):
            raise _Failed(
                seq, Break.INCLUSION_INVALID, "the inclusion proof does not yield the root"
            )
        records[seq] = record
        previous = (seq, entry["hash"])
    return records


def _tokens(bundle: Mapping[str, Any], records: Mapping[int, Mapping[str, Any]]) -> None:
    for token in bundle["tokens"]:
        record = records.get(token["seq"]) or {}
        data = record.get("data") or {}
        if not (
            record.get("event_type") == GRANT_EVENT
            and data.get("jti") == token.get("jti")
            and data.get("claims_digest") == token.get("claims_digest")
        ):
            raise _Failed(token["seq"], Break.TOKEN_MISMATCH, "not what the included event records")


def _receipts(bundle: Mapping[str, Any], records: Mapping[int, Mapping[str, Any]]) -> None:
    for receipt in bundle["receipts"]:
        seq = receipt["seq"]
        record = records.get(seq) or {}
        if record.get("event_type") != RECEIPT_EVENT or (record.get("data") or {}).get(
            "receipt"
        ) != receipt.get("receipt"):
            raise _Failed(seq, Break.RECEIPT_INVALID, "not the receipt the included event keeps")
        _receipt_signature(seq, receipt["receipt"], bundle["jwks"]["keys"], record)


def _receipt_signature(
    seq: int, jws: Any, keys: list[Mapping[str, Any]], record: Mapping[str, Any]
) -> None:
    try:
        header = protected_header(jws)
        jwk = next(k for k in keys if k.get("kid") == header.get("kid"))
        alg = header.get("alg")
        if alg not in ("EdDSA", "ES256"):
            raise ValueError(f"alg {alg!r} is not EdDSA or ES256")
        decoded = jwt.api_jws.decode_complete(compact(jws), jwt.PyJWK(dict(jwk)).key, [alg])
        claims = json.loads(decoded["payload"])
    except (LedgerError, StopIteration, ValueError, TypeError, KeyError, jwt.PyJWTError) as exc:
        raise _Failed(seq, Break.RECEIPT_INVALID, f"the receipt does not verify: {exc}") from None
    for name in ("handoff_id", "attempt"):
        if name in claims and claims[name] != record.get(name):
            raise _Failed(seq, Break.RECEIPT_INVALID, f"the receipt's {name} is not the event's")


def verify_proof_bundle(
    bundle: Mapping[str, Any], trusted_public_jwk: Mapping[str, Any] | None = None
) -> VerifyReport:
    """Check a bundle from :func:`~coordinator.audit.proofs.prove_run` offline.

    Without ``trusted_public_jwk`` the tree head is checked with the key the bundle
    carries, which only shows that the bundle is internally consistent; pass the
    coordinator's published key to know who vouches for it.
    """
    try:
        _shape(bundle)
        head = _head(bundle, _keys(bundle, trusted_public_jwk))
        records = _events(bundle, head)
        _tokens(bundle, records)
        _receipts(bundle, records)
    except _Failed as failed:
        return VerifyReport(False, 0, 0, _GENESIS, failed.seq, failed.kind, failed.detail)
    last: Mapping[str, Any] = bundle["events"][-1]
    return VerifyReport(
        True,
        len(records),
        int(last["seq"]),
        str(last["hash"]),
        root_hash=head.root_hash,
        tree_heads=1,
    )
