#!/usr/bin/env python3
"""Check an a2a-federation proof bundle (docs/audit-bundle.md) offline, independently.

Needs only the Python standard library and the ``cryptography`` package; it imports
nothing of the a2a-federation code, so that an auditor can read it in full::

    python verify_bundle.py BUNDLE.json --coordinator-key COORDINATOR_KEYS.json \
        [--remote-key REMOTE_KEYS.json ...] [--json]
    python verify_bundle.py BUNDLE.json --unanchored [--json]
    python verify_bundle.py --consistency DOCUMENT.json --coordinator-key COORDINATOR_KEYS.json

Each key file is a JWK or a JWK Set (what ``federation keys show`` prints, what a remote
publishes); keys are matched by the RFC 7638 thumbprint computed here, never by a label,
and the keys the bundle carries are never trusted; the key-succession statements it
carries are followed from the remote keys given (a reader holding a remote's old key
checks what its successors signed), never from the coordinator's. Without a key the answer is
``no_anchor``; ``--unanchored`` checks the structure against the bundle's own keys and
says that nothing is proven. The third form checks the output of ``federation audit
consistency --json``: both tree heads and the consistency proof between them. Exit
status 0 when the input verifies, 1 when it does not (with the reason code of the first
failed step), 2 when the files cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

FORMAT = "a2a-federation.audit-proof/4"
# before verdicts carried receipts and dispatches grants: still checked
FORMAT_3 = "a2a-federation.audit-proof/3"
FORMAT_2 = "a2a-federation.audit-proof/2"  # before hop receipts: still checked
WITH_HOPS = (FORMAT, FORMAT_3)
TREE_HEAD_TYP = "ledger-tree-head+jwt"
RECEIPT_TYP = "a2a-receipt+jwt"
SUCCESSION_TYP = "key-succession+jwt"
MAX_SUCCESSIONS = 16
RECEIPT_EVENT = "handoff.receipt"
VERDICT_PREFIX = "artifact."
GRANT_EVENT = "grant.minted"
DISPATCH_EVENT = "message.dispatched"
HOP_RECEIPT_EVENT = "hop.receipt"
EXCHANGED_EVENT = "delegation.exchanged"
TERMINAL_STATES = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)
GENESIS = "0" * 64
BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
UNANCHORED = "unanchored: structure only, nothing proven"


@dataclass(frozen=True)
class Anchors:
    """The reader's keys by thumbprint: the coordinator's (tree heads), the remotes'
    (receipts); ``anchored`` false when they are the bundle's own."""

    coordinator: dict[str, dict[str, Any]]
    remotes: dict[str, dict[str, Any]]
    anchored: bool = True


class Failed(Exception):
    def __init__(self, seq: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.seq, self.reason, self.detail = seq, reason, detail


# --- encodings and signatures ---------------------------------------------------------


def b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def strict_json(text: str | bytes) -> Any:
    """A JSON value, refusing duplicate member names at any depth and NaN/Infinity."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({name for name, _ in pairs}) != len(pairs):
            raise ValueError("duplicate member name")
        return dict(pairs)

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    if isinstance(text, str) and text.startswith("\ufeff"):
        raise ValueError("a byte order mark before the document")
    check_depth(text.decode("utf-8") if isinstance(text, bytes) else text)
    return json.loads(text, object_pairs_hook=unique, parse_constant=constant)


MAX_DEPTH = 64


def check_depth(text: str) -> None:
    """ValueError when arrays and objects nest deeper than MAX_DEPTH (outside strings)."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = char == "\\", char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"arrays and objects nest deeper than {MAX_DEPTH}")
        elif char in "]}":
            depth -= 1


def strict_object(text: str | bytes) -> dict[str, Any]:
    value = strict_json(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


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


# --- RFC 8785 (JCS) -------------------------------------------------------------------


def jcs(value: Any) -> str:
    """The RFC 8785 serialisation of a parsed JSON value (ValueError if it has none)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        if abs(value) >= 2**53:
            raise ValueError("an integer outside the IEEE 754 safe range")
        return str(value)
    if isinstance(value, float):
        return jcs_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(jcs(item) for item in value) + "]"
    if isinstance(value, dict):
        names = sorted(value, key=lambda name: name.encode("utf-16-be"))
        return "{" + ",".join(f"{jcs(name)}:{jcs(value[name])}" for name in names) + "}"
    raise ValueError(f"not a JSON value: {type(value).__name__}")


def jcs_number(value: float) -> str:
    """ECMAScript's Number::toString, which RFC 8785 section 3.2.2.3 prescribes."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("a non-finite number")
    if value == 0:
        return "0"
    sign, rest = ("-", -value) if value < 0 else ("", value)
    mantissa, _, exponent = f"{rest!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    point = len(whole.lstrip("0")) + int(exponent or 0)  # the decimal point after `point`
    if not whole.lstrip("0"):  # 0.000ddd: leading zeros of the fraction move the point
        point = int(exponent or 0) - (len(fraction) - len(fraction.lstrip("0")))
    digits = digits.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    mark = "+" if e >= 0 else "-"
    body = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{body}e{mark}{abs(e)}"


# --- keys: the reader's anchors, by RFC 7638 thumbprint ------------------------------


THUMBPRINT_MEMBERS = {"OKP": ("crv", "kty", "x"), "EC": ("crv", "kty", "x", "y")}
KEY_ALG = {("OKP", "Ed25519"): "EdDSA", ("EC", "P-256"): "ES256"}


# An agent's identity: the RFC 9278 URI of its key's RFC 7638 thumbprint.
IDENTITY_PREFIX = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:"


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 thumbprint of an OKP (Ed25519) or EC (P-256) key."""
    members = {name: jwk[name] for name in THUMBPRINT_MEMBERS[jwk["kty"]]}
    digest = hashlib.sha256(jcs(members).encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def key_set(document: Any) -> dict[str, dict[str, Any]]:
    """``thumbprint -> JWK`` of a JWK or a JWK Set (``{"keys": [...]}``), as
    docs/audit-bundle.md "Keys" says; ValueError for anything else."""
    if not isinstance(document, dict):
        raise ValueError("a JWK or JWK Set must be a JSON object")
    jwks = document.get("keys", [document])
    if not isinstance(jwks, list) or not jwks:
        raise ValueError("a JWK Set needs a non-empty keys array")
    keys: dict[str, dict[str, Any]] = {}
    for jwk in jwks:
        kid = checked_key(jwk)
        if kid in keys:
            raise ValueError(f"key {kid} occurs twice")
        keys[kid] = jwk
    return keys


def checked_key(jwk: Any) -> str:
    """The thumbprint of one public signing key, once it is of the profile."""
    if not isinstance(jwk, dict) or "d" in jwk:
        raise ValueError("a key must be a public JWK")
    kty, crv = str(jwk.get("kty")), str(jwk.get("crv"))
    alg = KEY_ALG.get((kty, crv))
    members = THUMBPRINT_MEMBERS.get(kty, ())
    if alg is None or not all(isinstance(jwk.get(name), str) for name in members):
        raise ValueError("a key must be OKP Ed25519 or EC P-256")
    public_key(jwk)
    if jwk.get("use", "sig") != "sig" or jwk.get("alg", alg) != alg:
        raise ValueError("a key's use or alg is not for this signature")
    ops = jwk.get("key_ops")
    if "key_ops" in jwk and (not isinstance(ops, list) or "verify" not in ops):
        raise ValueError("a key's key_ops does not allow verify")
    kid = thumbprint(jwk)
    if jwk.get("kid", kid) != kid:
        raise ValueError(f"a key's kid {jwk.get('kid')!r} is not its thumbprint {kid}")
    return kid


def public_key(jwk: dict[str, Any]) -> Any:
    if jwk["kty"] == "OKP":
        return Ed25519PublicKey.from_public_bytes(strict_b64url(jwk["x"]))
    point = b"\x04" + strict_b64url(jwk["x"]) + strict_b64url(jwk["y"])
    return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)


def strict_b64url(text: str) -> bytes:
    """base64url without padding, in its one canonical spelling."""
    if not BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = b64url(text)
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode() != text:
        raise ValueError("not the canonical base64url")
    return data


# --- the steps of docs/audit-bundle.md ------------------------------------------------


def is_hex64(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_seq(value: Any) -> bool:
    return is_int(value) and value >= 1


def check_shape(bundle: dict[str, Any]) -> None:
    """Step 1."""
    if bundle.get("format") not in (FORMAT, FORMAT_3, FORMAT_2):
        raise Failed(0, "malformed", f"format is not {FORMAT}")
    kinds = {
        "run_id": str,
        "tree_head": str,
        "events": list,
        "tokens": list,
        "receipts": list,
        "artifacts": list,
    }
    if bundle["format"] in WITH_HOPS:
        kinds["hop_receipts"] = list
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
    for entry in bundle["tokens"] + bundle["receipts"] + bundle["artifacts"] + hops_listed(bundle):
        if not isinstance(entry, dict) or not is_seq(entry.get("seq")):
            raise Failed(0, "malformed", "a token, receipt or artifacts entry has no seq")
    if not all(isinstance(entry.get("content"), str) for entry in bundle["artifacts"]):
        raise Failed(0, "malformed", "an artifacts entry has no content string")
    for jwk in bundle["jwks"]["keys"]:
        if not isinstance(jwk, dict) or "d" in jwk:
            raise Failed(0, "malformed", "a JWK of the bundle is not a public key")
    statements = bundle.get("successions", [])
    if not isinstance(statements, list) or len(statements) > MAX_SUCCESSIONS:
        raise Failed(0, "malformed", "successions is not an array of at most 16 strings")
    if not all(isinstance(jws, str) for jws in statements):
        raise Failed(0, "malformed", "successions is not an array of at most 16 strings")


def hops_listed(bundle: dict[str, Any]) -> list[Any]:
    """The bundle's ``hop_receipts`` (format 2 has none)."""
    return bundle["hop_receipts"] if bundle.get("format") in WITH_HOPS else []


def check_anchors(bundle: dict[str, Any], anchors: Anchors | None, unanchored: bool) -> Anchors:
    """Step 2: the reader's keys; asked for, the bundle's own (which proves nothing)."""
    if anchors is not None:
        return anchors
    if not unanchored:
        raise Failed(0, "no_anchor", "no key of the reader's was given: nothing is proven")
    try:
        own = key_set(bundle["jwks"])
    except (ValueError, KeyError, TypeError) as exc:
        raise Failed(0, "malformed", f"the bundle's keys: {exc}") from None
    return Anchors(own, own, anchored=False)


def follow_successions(bundle: dict[str, Any], anchors: Anchors) -> tuple[Anchors, int]:
    """Step 2.2: the remote anchors and every key the statements lead to from them, with
    how many statements were followed. The coordinator anchors are never extended."""
    remotes = dict(anchors.remotes)
    pending = list(enumerate(bundle.get("successions", [])))
    followed = 0
    while True:
        added = [(index, jws) for index, jws in pending if vouch(jws, remotes)]
        if not added:
            return Anchors(anchors.coordinator, remotes, anchors.anchored), followed
        followed += len(added)
        pending = [entry for entry in pending if entry not in added]


def vouch(jws: str, remotes: dict[str, Any]) -> bool:
    """Whether a key of ``remotes`` signed ``jws`` in its own name as a key-succession
    statement naming a public key; if so its successor is added to ``remotes``."""
    parts = jws.split(".")
    try:
        if len(parts) != 3:
            return False
        header = strict_object(strict_b64url(parts[0]))
        if set(header) != {"alg", "kid", "typ"} or header["typ"] != SUCCESSION_TYP:
            return False
        key = remotes.get(header["kid"]) if isinstance(header["kid"], str) else None
        if key is None or header["alg"] != KEY_ALG[(key["kty"], key["crv"])]:
            return False
        strict_b64url(parts[2])
        verify_jws(parts[0], parts[1], parts[2], key, header["alg"])
        claims = strict_object(strict_b64url(parts[1]))
        if claims.get("iss") != IDENTITY_PREFIX + header["kid"]:
            return False
        kid = checked_key(claims.get("successor"))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    remotes.setdefault(kid, claims["successor"])
    return True


def check_tree_head(bundle: dict[str, Any], anchors: Anchors) -> tuple[int, bytes]:
    """Step 3."""
    kid = jws_kid(bundle["tree_head"])
    key = anchors.coordinator.get(kid) if isinstance(kid, str) else None
    if key is None or key["kty"] != "OKP":
        if anchors.anchored:
            raise Failed(0, "untrusted_key", "the tree head is not signed by a key given")
        raise Failed(0, "head_invalid", "no key of the bundle is the tree head's")
    return check_head_jws(bundle["tree_head"], key, minimum=1)


def jws_kid(jws: str) -> Any:
    try:
        header = json.loads(b64url(jws.split(".")[0]))
    except (ValueError, IndexError):
        return None
    return header.get("kid") if isinstance(header, dict) else None


def check_head_jws(jws: str, key: dict[str, Any], minimum: int) -> tuple[int, bytes]:
    """``(tree_size, root)`` of a tree head that ``key`` signed."""
    parts = jws.split(".")
    if len(parts) != 3:
        raise Failed(0, "head_invalid", "the tree head is not a compact JWS")
    try:
        header = strict_object(b64url(parts[0]))
        claims = strict_object(b64url(parts[1]))
    except ValueError as exc:
        raise Failed(0, "head_invalid", f"the tree head is unreadable: {exc}") from None
    if set(header) != {"alg", "kid", "typ"}:
        raise Failed(0, "head_invalid", "the tree head's header is not exactly alg, kid, typ")
    if header.get("alg") != "EdDSA" or header.get("typ") != TREE_HEAD_TYP:
        raise Failed(0, "head_invalid", "the tree head's alg or typ is wrong")
    try:
        verify_jws(parts[0], parts[1], parts[2], key, "EdDSA")
    except (InvalidSignature, ValueError):
        raise Failed(0, "head_invalid", "the tree head's signature does not verify") from None
    size: Any = claims.get("tree_size")
    root: Any = claims.get("root_hash")
    sized = is_int(size) and size >= minimum
    if not (sized and is_hex64(root) and isinstance(claims.get("issued_at"), str)):
        raise Failed(0, "head_invalid", "the tree head lacks tree_size, root_hash or issued_at")
    if not isinstance(claims.get("iss"), str):
        raise Failed(0, "head_invalid", "the tree head lacks iss")
    return size, bytes.fromhex(root)


TEXT, TEXT_OR_NULL, INT_OR_NULL = (str,), (str, type(None)), (int, type(None))
RECORD_MEMBERS = {
    "seq": (int,),
    "prev_hash": TEXT,
    "event_type": TEXT,
    "recorded_at": TEXT,
    "run_id": TEXT_OR_NULL,
    "handoff_id": TEXT_OR_NULL,
    "attempt": INT_OR_NULL,
    "actor": TEXT,
    "remote_task_id": TEXT_OR_NULL,
    "trace_id": TEXT_OR_NULL,
    "data": (dict,),
}


def check_record(event: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Step 4.3: the record, of exactly the ledger's form, this run's, at its seq, and
    its bytes are its RFC 8785 form."""
    seq = event["seq"]
    try:
        record = strict_json(event["canonical"])
    except ValueError as exc:
        raise Failed(seq, "malformed", f"the event is not JSON: {exc}") from None
    if not (
        isinstance(record, dict)
        and set(record) == set(RECORD_MEMBERS)
        and all(
            isinstance(record[name], kinds) and not isinstance(record[name], bool)
            for name, kinds in RECORD_MEMBERS.items()
        )
    ):
        raise Failed(seq, "malformed", "the event is not a record of the ledger's form")
    if record["seq"] != seq or record["run_id"] != run_id:
        raise Failed(seq, "malformed", "the event is not this run's, or not at its seq")
    try:
        canonical = jcs(record).encode("utf-8") == event["canonical"].encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        canonical = False
    if not canonical:
        raise Failed(seq, "not_canonical", "the event's bytes are not its RFC 8785 form")
    return record


def check_events(bundle: dict[str, Any], size: int, root: bytes) -> dict[int, dict[str, Any]]:
    """Step 4."""
    records: dict[int, dict[str, Any]] = {}
    previous: tuple[int, str] | None = None
    for event in bundle["events"]:
        seq = event["seq"]
        if (previous is not None and seq <= previous[0]) or seq > size:
            raise Failed(seq, "malformed", "events are not in order within the tree head")
        try:
            digest = hashlib.sha256(event["canonical"].encode("utf-8")).digest()
        except UnicodeEncodeError:
            raise Failed(seq, "malformed", "the event is not UTF-8 text") from None
        if digest.hex() != event["hash"]:
            raise Failed(seq, "hash_mismatch", "the event does not match its hash")
        record = check_record(event, bundle["run_id"])
        if previous and previous[0] == seq - 1 and record["prev_hash"] != previous[1]:
            raise Failed(seq, "prev_mismatch", f"prev_hash does not match event {seq - 1}")
        if seq == 1 and record["prev_hash"] != GENESIS:
            raise Failed(seq, "prev_mismatch", "the first event does not start the chain")
        proof = [bytes.fromhex(node) for node in event["inclusion_proof"]]
        if root_from_inclusion(seq - 1, size, leaf_hash(digest), proof) != root:
            raise Failed(seq, "inclusion_invalid", "the inclusion proof does not yield the root")
        records[seq] = record
        previous = (seq, event["hash"])
    return records


def check_tokens(bundle: dict[str, Any], records: dict[int, dict[str, Any]]) -> None:
    """Step 5."""
    for token in bundle["tokens"]:
        grant = grant_of(records.get(token["seq"], {}))
        if not (
            grant is not None
            and same_member(grant, "jti", token, "jti")
            and same_member(grant, "claims_digest", token, "claims_digest")
        ):
            raise Failed(token["seq"], "token_mismatch", "not what the included event records")


def grant_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The grant an event records: a grant.minted's data, or the grant object a
    message.dispatched carries (format 4); None for any other."""
    if record.get("event_type") == GRANT_EVENT:
        return record["data"]
    if record.get("event_type") == DISPATCH_EVENT:
        grant = record["data"].get("grant")
        return grant if isinstance(grant, dict) else None
    return None


def check_receipts(
    bundle: dict[str, Any], records: dict[int, dict[str, Any]], remotes: dict[str, Any]
) -> None:
    """Step 6: the list (6.1), the artifacts' entries (6.2), every receipt event (6.3)."""
    for entry in bundle["receipts"]:
        record = records.get(entry["seq"], {})
        kept = record.get("data", {}).get("receipt")
        if not records_receipt(record) or kept != entry.get("receipt"):
            detail = "not the receipt the included event keeps"
            raise Failed(entry["seq"], "receipt_invalid", detail)
    artifacts: dict[int, str] = {}
    for entry in bundle["artifacts"]:
        seq = entry["seq"]
        if not records_receipt(records.get(seq, {})) or seq in artifacts:
            raise Failed(seq, "artifact_mismatch", "not the artifacts of one receipt")
        artifacts[seq] = entry["content"]
    for seq in sorted(records):
        if records_receipt(records[seq]):
            claims = check_receipt_signature(seq, records[seq], remotes)
            check_receipt_binding(seq, records[seq], claims, records)
            check_receipt_artifacts(seq, records[seq], claims, artifacts.get(seq), records)


def records_receipt(record: dict[str, Any]) -> bool:
    """Whether an event records a receipt: every handoff.receipt, and a verdict
    (artifact.*) whose data has a receipt member (format 4)."""
    if not record:
        return False
    if record["event_type"] == RECEIPT_EVENT:
        return True
    return record["event_type"].startswith(VERDICT_PREFIX) and "receipt" in record["data"]


def check_hop_receipts(
    bundle: dict[str, Any], records: dict[int, dict[str, Any]], remotes: dict[str, Any]
) -> None:
    """Step 7: the list (7.1), then every hop receipt event (7.2)."""
    for entry in hops_listed(bundle):
        record = records.get(entry["seq"], {})
        data = record.get("data", {})
        if record.get("event_type") != HOP_RECEIPT_EVENT or not same_member(
            data, "receipt", entry, "receipt"
        ):
            raise Failed(entry["seq"], "receipt_invalid", "not the hop receipt the event keeps")
    for seq in sorted(records):
        if records[seq]["event_type"] == HOP_RECEIPT_EVENT:
            claims = check_receipt_signature(seq, records[seq], remotes)
            problem = hop_problem(seq, records[seq], claims, records)
            if problem is not None:
                raise Failed(seq, "receipt_mismatch", problem)


def hop_problem(
    seq: int, record: dict[str, Any], claims: dict[str, Any], records: dict[int, dict[str, Any]]
) -> str | None:
    """7.2.3: the receipt states the child exchanged from the handoff that carried it."""
    jti = claims.get("jti")
    hop = next(
        (
            records[s]["data"]
            for s in sorted(records)
            if s < seq
            and records[s]["event_type"] == EXCHANGED_EVENT
            and isinstance(jti, str)
            and records[s]["data"].get("jti") == jti
        ),
        None,
    )
    attempt = claims.get("attempt")
    if hop is None:
        return "the receipt's jti is no child the ledger exchanged"
    if not same_member(hop, "parent_handoff_id", record, "handoff_id"):
        return "the child was not exchanged from the handoff that carried its receipt"
    if not same_member(claims, "handoff_id", hop, "handoff_id"):
        return "the receipt's handoff_id is not the child's"
    if not (is_int(attempt) and attempt == 1):
        return "the receipt's attempt is not 1"
    if claims.get("req_digest") is not None:
        return "the receipt names a req_digest, which no child binds"
    if not isinstance(claims.get("iss"), str) or not same_member(claims, "iss", hop, "aud"):
        return "the receipt's iss is not the audience the child was minted for"
    if not isinstance(claims.get("task_id"), str) or claims.get("state") not in TERMINAL_STATES:
        return "the receipt states no task or no terminal state"
    return None


def check_receipt_signature(
    seq: int, record: dict[str, Any], remotes: dict[str, Any]
) -> dict[str, Any]:
    """6.3.1 and 6.3.2: a flattened JWS, header exactly alg/kid/typ, by a remote key
    given, in the name of that key's identity."""
    jws = record["data"].get("receipt")
    members = ("protected", "payload", "signature")
    if not (
        isinstance(jws, dict)
        and set(jws) == set(members)
        and all(isinstance(jws[name], str) and BASE64URL.fullmatch(jws[name]) for name in members)
    ):
        raise Failed(seq, "receipt_invalid", "the event keeps no flattened JWS")
    try:
        header = json.loads(strict_b64url(jws["protected"]))
    except ValueError:
        raise Failed(seq, "receipt_invalid", "the receipt's header is unreadable") from None
    if not isinstance(header, dict) or set(header) != {"alg", "kid", "typ"}:
        raise Failed(seq, "receipt_invalid", "the receipt's header is not exactly alg, kid, typ")
    if header["typ"] != RECEIPT_TYP:
        raise Failed(seq, "receipt_invalid", f"the receipt's typ is not {RECEIPT_TYP}")
    key = remotes.get(header["kid"]) if isinstance(header["kid"], str) else None
    if key is None:
        raise Failed(seq, "untrusted_key", "the receipt is not signed by a remote key given")
    try:
        alg = KEY_ALG[(key["kty"], key["crv"])]
        if header["alg"] != alg:
            raise ValueError("the receipt's alg is not its key's")
        verify_jws(jws["protected"], jws["payload"], jws["signature"], key, alg)
        claims = strict_json(b64url(jws["payload"]))
    except (InvalidSignature, ValueError) as exc:
        raise Failed(seq, "receipt_invalid", f"the receipt does not verify: {exc!r}") from None
    if not isinstance(claims, dict):
        raise Failed(seq, "receipt_invalid", "the receipt's payload is not a JSON object")
    if claims.get("iss") != IDENTITY_PREFIX + header["kid"]:
        detail = "the receipt's iss is not the identity of the key that verified it"
        raise Failed(seq, "receipt_issuer_mismatch", detail)
    return claims


def check_receipt_binding(
    seq: int, record: dict[str, Any], claims: dict[str, Any], records: dict[int, dict[str, Any]]
) -> None:
    """6.3.3: the receipt states what the ledger recorded, in this order."""
    attempt: Any = claims.get("attempt")
    ours: Any = record["attempt"]
    task_id = claims.get("task_id")
    problem: str | None
    if not same_member(claims, "handoff_id", record, "handoff_id"):
        problem = "the receipt's handoff_id is not the event's"
    elif not (is_int(attempt) and is_int(ours) and 1 <= attempt <= ours):
        problem = "the receipt's attempt is not between 1 and the event's"
    elif not isinstance(task_id, str) or task_id != record["remote_task_id"]:
        problem = "the receipt's task_id is not the event's remote_task_id"
    else:
        problem = token_problem(record, claims, records)
    if problem is None and not same_member(
        claims, "state", final_state(record, records), "remote_state"
    ):
        problem = "the receipt's state is not the last state the ledger observed"
    if problem is not None:
        raise Failed(seq, "receipt_mismatch", problem)


def token_problem(
    record: dict[str, Any], claims: dict[str, Any], records: dict[int, dict[str, Any]]
) -> str | None:
    recorded = [grant_of(r) for r in records.values() if r["handoff_id"] == record["handoff_id"]]
    grants = [grant for grant in recorded if grant is not None]
    jti = claims.get("jti")
    if jti is None:
        if claims.get("req_digest") is None and not grants:
            return None
        return "the receipt names no token, but the ledger minted one for the handoff"
    grant = next((data for data in grants if data.get("jti") == jti), None)
    if not isinstance(jti, str) or grant is None:
        return "the receipt's jti is no token the ledger minted for the handoff"
    if not same_member(grant, "req_digest", claims, "req_digest"):
        return "the receipt's req_digest is not the one the token bound"
    if not isinstance(claims.get("iss"), str) or grant.get("aud") != claims.get("iss"):
        return "the receipt's iss is not the audience the token was minted for"
    return None


def same_task(one: dict[str, Any], other: dict[str, Any]) -> bool:
    return (one["handoff_id"], one["remote_task_id"]) == (
        other["handoff_id"],
        other["remote_task_id"],
    )


def final_state(record: dict[str, Any], records: dict[int, dict[str, Any]]) -> Any:
    observed = [
        seq
        for seq, r in records.items()
        if r["event_type"] == "remote.state_observed" and same_task(r, record)
    ]
    return records[max(observed)]["data"] if observed else {}


def same_member(one: dict[str, Any], name: str, other: dict[str, Any], as_: str) -> bool:
    """``one[name]`` equals ``other[as_]``; an absent member equals nothing, not even
    another absent member."""
    return name in one and as_ in other and json_equal(one[name], other[as_])


def json_equal(one: Any, other: Any) -> bool:
    """Equal as JSON values: a boolean is never a number, and 1 is 1.0."""
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, int | float) and isinstance(other, int | float):
        return one == other
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(json_equal(one[k], other[k]) for k in one)
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(json_equal, one, other))
    return type(one) is type(other) and one == other


def check_receipt_artifacts(
    seq: int,
    record: dict[str, Any],
    claims: dict[str, Any],
    content: str | None,
    records: dict[int, dict[str, Any]],
) -> None:
    """6.3.4: the artifacts carried are those the receipt signed and the ledger received."""
    if content is None:
        raise Failed(seq, "artifact_missing", "the bundle carries no artifacts for it")
    try:
        value = strict_json(content)
        if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
            raise ValueError("not an array of objects")
        digest = hashlib.sha256(jcs(value).encode("utf-8")).digest()
        signed = "sha-256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    except (ValueError, UnicodeEncodeError):
        signed = None
    if signed is None or signed != claims.get("artifact_digest"):
        raise Failed(seq, "artifact_mismatch", "not the artifacts the receipt signed")
    later = [
        s
        for s, r in records.items()
        if s >= seq and r["event_type"].startswith(VERDICT_PREFIX) and same_task(r, record)
    ]
    received = "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()
    if later and records[min(later)]["data"].get("content_hash") != received:
        raise Failed(seq, "artifact_mismatch", "not the artifacts the ledger received")


def verify(bundle: Any, anchors: Anchors | None, unanchored: bool = False) -> dict[str, Any]:
    if not isinstance(bundle, dict):
        return {"ok": False, "reason": "malformed", "seq": 0, "detail": "not a JSON object"}
    try:
        check_shape(bundle)
        keys, followed = follow_successions(bundle, check_anchors(bundle, anchors, unanchored))
        size, root = check_tree_head(bundle, keys)
        records = check_events(bundle, size, root)
        check_tokens(bundle, records)
        check_receipts(bundle, records, keys.remotes)
        check_hop_receipts(bundle, records, keys.remotes)
    except Failed as failed:
        return {"ok": False, "reason": failed.reason, "seq": failed.seq, "detail": failed.detail}
    return {
        "ok": True,
        "reason": None,
        "anchored": keys.anchored,
        "events": len(records),
        "tree_size": size,
        "root": root.hex(),
        "successions": followed,
    }


def verify_consistency_document(document: Any, anchors: Anchors) -> dict[str, Any]:
    """Both heads of an ``audit consistency --json`` document, and the proof between them."""
    try:
        heads = []
        for name in ("old", "new"):
            jws = document[name]["jws"]
            key = anchors.coordinator.get(jws_kid(jws))
            if key is None or key["kty"] != "OKP":
                raise Failed(0, "untrusted_key", f"the {name} head is not signed by a key given")
            heads.append(check_head_jws(jws, key, minimum=0))
        proof = [bytes.fromhex(node) for node in document["proof"]]
        if not all(len(node) == 32 for node in proof):
            raise Failed(0, "malformed", "a proof node is not 32 bytes")
    except Failed as failed:
        return {"ok": False, "reason": failed.reason, "detail": failed.detail}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return {"ok": False, "reason": "malformed", "detail": repr(exc)}
    (old_size, old_root), (new_size, new_root) = sorted(heads)
    if not verify_consistency(old_size, new_size, old_root, new_root, proof):
        detail = f"the head of {new_size} events does not extend the head of {old_size}"
        return {"ok": False, "reason": "inconsistent", "detail": detail}
    return {"ok": True, "reason": None, "old_size": old_size, "new_size": new_size}


def read_keys(paths: list[str]) -> dict[str, dict[str, Any]]:
    keys: dict[str, dict[str, Any]] = {}
    for path in paths:
        with open(path, "rb") as file:
            keys.update(key_set(strict_json(file.read())))
    return keys


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "bundle", help="a proof bundle, or with --consistency a consistency document"
    )
    parser.add_argument(
        "--coordinator-key",
        "--trusted-jwk",
        action="append",
        default=[],
        help="the coordinator's public key: a JWK or a JWK Set, as `federation keys show` "
        "prints it (repeatable)",
    )
    parser.add_argument(
        "--remote-key",
        action="append",
        default=[],
        help="a remote's public key, a JWK or a JWK Set (repeatable)",
    )
    parser.add_argument(
        "--unanchored",
        action="store_true",
        help="no key: check the structure against the bundle's own keys (proves nothing)",
    )
    parser.add_argument(
        "--consistency", action="store_true", help="check an `audit consistency --json` document"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args()


def summary(result: dict[str, Any]) -> str:
    if not result["ok"]:
        where = "refused" if result["reason"] == "no_anchor" else f"broken at event {result['seq']}"
        return f"{where}: {result['reason']} ({result['detail']})"
    text = f"ok: {result['events']} events included in the signed tree of {result['tree_size']}"
    if result["successions"]:
        text += f", remote keys extended by {result['successions']} key-succession statement(s)"
    return text if result["anchored"] else f"{UNANCHORED} ({text})"


def main() -> int:
    args = arguments()
    try:
        with open(args.bundle, "rb") as file:
            bundle = strict_json(file.read())
        coordinator, remotes = read_keys(args.coordinator_key), read_keys(args.remote_key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read the input: {exc}", file=sys.stderr)
        return 2
    if (coordinator or remotes) and args.unanchored:
        print("--unanchored goes with no key", file=sys.stderr)
        return 2
    if remotes and not coordinator:
        print("--remote-key needs --coordinator-key too", file=sys.stderr)
        return 2
    anchors = Anchors(coordinator, remotes) if coordinator else None
    if args.consistency:
        if anchors is None:
            print("--consistency needs --coordinator-key", file=sys.stderr)
            return 2
        result = verify_consistency_document(bundle, anchors)
        print(json.dumps(result) if args.json else result.get("detail") or "consistent")
        return 0 if result["ok"] else 1
    result = verify(bundle, anchors, args.unanchored)
    print(json.dumps(result) if args.json else summary(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
