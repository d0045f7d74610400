#!/usr/bin/env python3
"""Check an a2a-federation proof bundle (docs/audit-bundle.md) offline, independently.

Needs only the Python standard library and the ``cryptography`` package; it imports
nothing of the a2a-federation code, so that an auditor can read it in full::

    python verify_bundle.py BUNDLE.json [--trusted-jwk COORDINATOR_JWK.json] [--json]
    python verify_bundle.py --consistency DOCUMENT.json --trusted-jwk COORDINATOR_JWK.json

The second form checks the output of ``federation audit consistency --json``: both tree
heads and the consistency proof between them. Exit status 0 when the input verifies, 1
when it does not (with the reason code of the first failed step), 2 when the files
cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

FORMAT = "a2a-federation.audit-proof/1"
TREE_HEAD_TYP = "ledger-tree-head+jwt"
GENESIS = "0" * 64


class Failed(Exception):
    def __init__(self, seq: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.seq, self.reason, self.detail = seq, reason, detail


# --- encodings and signatures ---------------------------------------------------------


def b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def strict_object(text: str | bytes) -> dict[str, Any]:
    """A JSON object, refusing duplicate member names at any depth."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({name for name, _ in pairs}) != len(pairs):
            raise ValueError("duplicate member name")
        return dict(pairs)

    value = json.loads(text, object_pairs_hook=unique)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 thumbprint of an Ed25519 (OKP) key."""
    members = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True)
    return (
        base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
    )


def verify_jws(protected: str, payload: str, signature: str, jwk: dict[str, Any], alg: str) -> None:
    """Raise InvalidSignature (or ValueError) unless ``jwk`` signed the JWS with ``alg``."""
    signing_input = f"{protected}.{payload}".encode("ascii")
    raw = b64url(signature)
    if alg == "EdDSA" and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
        Ed25519PublicKey.from_public_bytes(b64url(jwk["x"])).verify(raw, signing_input)
    elif alg == "ES256" and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        if len(raw) != 64:
            raise InvalidSignature()
        point = b"\x04" + b64url(jwk["x"]) + b64url(jwk["y"])
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        der = encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:]))
        key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
    else:
        raise ValueError(f"alg {alg!r} does not fit the key")


# --- RFC 9162 section 2 ---------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_consistency(m: int, n: int, root_m: bytes, root_n: bytes, proof: list[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if not 0 <= m <= n:
        return False
    if m == n:
        return root_m == root_n and not proof
    if m == 0:
        return root_m == hashlib.sha256(b"").digest() and not proof
    if not proof:
        return False
    if m & (m - 1) == 0:
        proof = [root_m, *proof]
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    first = second = proof[0]
    for node in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first, second = node_hash(node, first), node_hash(node, second)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            second = node_hash(second, node)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and first == root_m and second == root_n


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    """RFC 9162 section 2.1.3.2."""
    if not 0 <= index < size:
        return None
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return node if sn == 0 else None


# --- the steps of docs/audit-bundle.md ------------------------------------------------


def is_hex64(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def is_seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_shape(bundle: dict[str, Any]) -> None:
    if bundle.get("format") != FORMAT:
        raise Failed(0, "malformed", f"format is not {FORMAT}")
    kinds = {"run_id": str, "tree_head": str, "events": list, "tokens": list, "receipts": list}
    for name, kind in kinds.items():
        if not isinstance(bundle.get(name), kind):
            raise Failed(0, "malformed", f"{name} is missing or of the wrong type")
    if not isinstance(bundle.get("jwks"), dict) or not isinstance(bundle["jwks"].get("keys"), list):
        raise Failed(0, "malformed", "jwks is not a JWK Set")
    if not bundle["events"]:
        raise Failed(0, "malformed", "the bundle has no events")
    for event in bundle["events"]:
        fields_ok = isinstance(event, dict) and is_seq(event.get("seq"))
        fields_ok = fields_ok and isinstance(event.get("canonical"), str)
        fields_ok = fields_ok and isinstance(event.get("hash"), str)
        proof = event.get("inclusion_proof") if isinstance(event, dict) else None
        if not (fields_ok and isinstance(proof, list) and all(is_hex64(n) for n in proof)):
            raise Failed(0, "malformed", "an event is not {seq, hash, canonical, inclusion_proof}")
    for entry in bundle["tokens"] + bundle["receipts"]:
        if not isinstance(entry, dict) or not is_seq(entry.get("seq")):
            raise Failed(0, "malformed", "a token or receipt entry has no seq")
    for jwk in bundle["jwks"]["keys"]:
        if not isinstance(jwk, dict) or "d" in jwk or "kid" not in jwk:
            raise Failed(0, "malformed", "a JWK is not a public key with a kid")


def check_tree_head(bundle: dict[str, Any], trusted: dict[str, Any] | None) -> tuple[int, bytes]:
    return check_head_jws(bundle["tree_head"], bundle["jwks"]["keys"], trusted, minimum=1)


def check_head_jws(
    jws: str, keys: list[dict[str, Any]], trusted: dict[str, Any] | None, minimum: int
) -> tuple[int, bytes]:
    """Step 3 of docs/audit-bundle.md: ``(tree_size, root)`` of a verified tree head."""
    parts = jws.split(".")
    if len(parts) != 3:
        raise Failed(0, "head_invalid", "the tree head is not a compact JWS")
    try:
        header = strict_object(b64url(parts[0]))
        claims = strict_object(b64url(parts[1]))
    except ValueError as exc:
        raise Failed(0, "head_invalid", f"the tree head is unreadable: {exc}") from None
    kid = header.get("kid")
    if trusted is not None:
        if thumbprint(trusted) != kid:
            raise Failed(0, "untrusted_key", "the tree head is not signed by the trusted key")
        keys = [trusted]
    key = next((k for k in keys if k.get("kty") == "OKP" and thumbprint(k) == kid), None)
    if key is None:
        raise Failed(0, "head_invalid", "no key of the bundle has the tree head's kid")
    if header.get("alg") != "EdDSA" or header.get("typ") != TREE_HEAD_TYP:
        raise Failed(0, "head_invalid", "the tree head's alg or typ is wrong")
    try:
        verify_jws(parts[0], parts[1], parts[2], key, "EdDSA")
    except (InvalidSignature, ValueError):
        raise Failed(0, "head_invalid", "the tree head's signature does not verify") from None
    size, root = claims.get("tree_size"), claims.get("root_hash")
    sized = isinstance(size, int) and not isinstance(size, bool) and size >= minimum
    if not (sized and is_hex64(root) and isinstance(claims.get("issued_at"), str)):
        raise Failed(0, "head_invalid", "the tree head lacks tree_size, root_hash or issued_at")
    if not isinstance(claims.get("iss"), str):
        raise Failed(0, "head_invalid", "the tree head lacks iss")
    return size, bytes.fromhex(root)


def check_events(bundle: dict[str, Any], size: int, root: bytes) -> dict[int, dict[str, Any]]:
    records: dict[int, dict[str, Any]] = {}
    previous: tuple[int, str] | None = None
    for event in bundle["events"]:
        seq = event["seq"]
        if (previous is not None and seq <= previous[0]) or seq > size:
            raise Failed(seq, "malformed", "events are not in order within the tree head")
        digest = hashlib.sha256(event["canonical"].encode("utf-8")).digest()
        if digest.hex() != event["hash"]:
            raise Failed(seq, "hash_mismatch", "the event does not match its hash")
        try:
            record = strict_object(event["canonical"])
        except ValueError as exc:
            raise Failed(seq, "malformed", f"the event is not a JSON object: {exc}") from None
        if record.get("seq") != seq or record.get("run_id") != bundle["run_id"]:
            raise Failed(seq, "malformed", "the event is not this run's, or not at its seq")
        if previous and previous[0] == seq - 1 and record.get("prev_hash") != previous[1]:
            raise Failed(seq, "prev_mismatch", f"prev_hash does not match event {seq - 1}")
        if seq == 1 and record.get("prev_hash") != GENESIS:
            raise Failed(seq, "prev_mismatch", "the first event does not start the chain")
        proof = [bytes.fromhex(node) for node in event["inclusion_proof"]]
        if root_from_inclusion(seq - 1, size, leaf_hash(digest), proof) != root:
            raise Failed(seq, "inclusion_invalid", "the inclusion proof does not yield the root")
        records[seq] = record
        previous = (seq, event["hash"])
    return records


def check_tokens(bundle: dict[str, Any], records: dict[int, dict[str, Any]]) -> None:
    for token in bundle["tokens"]:
        record = records.get(token["seq"], {})
        data = record.get("data") if isinstance(record.get("data"), dict) else {}
        if not (
            record.get("event_type") == "grant.minted"
            and data.get("jti") == token.get("jti")
            and data.get("claims_digest") == token.get("claims_digest")
        ):
            raise Failed(token["seq"], "token_mismatch", "not what the included event records")


def check_receipts(bundle: dict[str, Any], records: dict[int, dict[str, Any]]) -> None:
    for entry in bundle["receipts"]:
        seq = entry["seq"]
        record = records.get(seq, {})
        data = record.get("data") if isinstance(record.get("data"), dict) else {}
        jws = entry.get("receipt")
        if record.get("event_type") != "handoff.receipt" or data.get("receipt") != jws:
            raise Failed(seq, "receipt_invalid", "not the receipt the included event keeps")
        try:
            header = strict_object(b64url(jws["protected"]))
            key = next(k for k in bundle["jwks"]["keys"] if k.get("kid") == header.get("kid"))
            verify_jws(jws["protected"], jws["payload"], jws["signature"], key, header.get("alg"))
            claims = strict_object(b64url(jws["payload"]))
        except (InvalidSignature, StopIteration, ValueError, TypeError, KeyError) as exc:
            raise Failed(seq, "receipt_invalid", f"the receipt does not verify: {exc!r}") from None
        for name in ("handoff_id", "attempt"):
            if name in claims and claims[name] != record.get(name):
                raise Failed(seq, "receipt_invalid", f"the receipt's {name} is not the event's")


def verify(bundle: dict[str, Any], trusted: dict[str, Any] | None) -> dict[str, Any]:
    try:
        check_shape(bundle)
        size, root = check_tree_head(bundle, trusted)
        records = check_events(bundle, size, root)
        check_tokens(bundle, records)
        check_receipts(bundle, records)
    except Failed as failed:
        return {"ok": False, "reason": failed.reason, "seq": failed.seq, "detail": failed.detail}
    except (KeyError, TypeError, ValueError) as exc:
        return {"ok": False, "reason": "malformed", "seq": 0, "detail": repr(exc)}
    return {
        "ok": True,
        "reason": None,
        "events": len(records),
        "tree_size": size,
        "root": root.hex(),
    }


def verify_consistency_document(
    document: dict[str, Any], trusted: dict[str, Any]
) -> dict[str, Any]:
    """Both heads of an ``audit consistency --json`` document, and the proof between them."""
    try:
        old = check_head_jws(document["old"]["jws"], [], trusted, minimum=0)
        new = check_head_jws(document["new"]["jws"], [], trusted, minimum=0)
        proof = [bytes.fromhex(node) for node in document["proof"]]
        if not all(len(node) == 32 for node in proof):
            raise Failed(0, "malformed", "a proof node is not 32 bytes")
    except Failed as failed:
        return {"ok": False, "reason": failed.reason, "detail": failed.detail}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return {"ok": False, "reason": "malformed", "detail": repr(exc)}
    (old_size, old_root), (new_size, new_root) = sorted([old, new])
    if not verify_consistency(old_size, new_size, old_root, new_root, proof):
        detail = f"the head of {new_size} events does not extend the head of {old_size}"
        return {"ok": False, "reason": "inconsistent", "detail": detail}
    return {"ok": True, "reason": None, "old_size": old_size, "new_size": new_size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "bundle", help="a proof bundle, or with --consistency a consistency document"
    )
    parser.add_argument("--trusted-jwk", help="the coordinator's public JWK, as published")
    parser.add_argument(
        "--consistency", action="store_true", help="check an `audit consistency --json` document"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    try:
        with open(args.bundle, "rb") as file:
            bundle = strict_object(file.read())
        trusted = None
        if args.trusted_jwk:
            with open(args.trusted_jwk, "rb") as file:
                trusted = strict_object(file.read())
    except (OSError, ValueError) as exc:
        print(f"cannot read the input: {exc}", file=sys.stderr)
        return 2
    if args.consistency:
        if trusted is None:
            print("--consistency needs --trusted-jwk", file=sys.stderr)
            return 2
        result = verify_consistency_document(bundle, trusted)
        print(json.dumps(result) if args.json else result.get("detail") or "consistent")
        return 0 if result["ok"] else 1
    result = verify(bundle, trusted)
    if args.json:
        print(json.dumps(result))
    elif result["ok"]:
        print(f"ok: {result['events']} events included in the signed tree of {result['tree_size']}")
    else:
        print(f"broken at event {result['seq']}: {result['reason']} ({result['detail']})")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
