"""An outside verifier of audit proof bundles, written from docs/audit-bundle.md alone.

Its author read only that document (and RFC 9162, 8785, 7515, 7638, 8037), not the
project's verifiers nor any product code: it exists to show the document is precise
enough for someone else to write a verifier that agrees with ours. It uses the Python
standard library, ``cryptography`` and ``rfc8785``, nothing of this project.

``verify(bundle, coordinator_keys, remote_keys)`` returns ``(verdict, reason_code)``:
``("verified", None)``, ``("unanchored", None)`` for a structure-only check that passes
(``unanchored=True``), or ``("refused", code)``. ``verify_detailed`` adds the ``seq``.
A key file the document says is refused raises ``KeyFileRefused`` (a usage error).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

FORMAT = "a2a-federation.audit-proof/4"
# format 3: every receipt in a handoff.receipt event, every grant in a grant.minted one;
# format 2: no hop_receipts either
FORMAT_3 = "a2a-federation.audit-proof/3"
FORMATS = (FORMAT, FORMAT_3, "a2a-federation.audit-proof/2")
TERMINAL = (
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
)
HEX64 = re.compile(r"[0-9a-f]{64}")
B64URL = re.compile(r"[A-Za-z0-9_-]+")
RECORD_MEMBERS = {
    "seq",
    "prev_hash",
    "event_type",
    "recorded_at",
    "run_id",
    "handoff_id",
    "remote_task_id",
    "trace_id",
    "attempt",
    "actor",
    "data",
}
P256_ORDER_BYTES = 32


class Refused(Exception):
    def __init__(self, reason: str, seq: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seq = seq


class KeyFileRefused(Exception):
    """A key file the reader passed breaks the key rules (usage error, no verdict)."""


class Outcome(NamedTuple):
    verdict: str
    reason: str | None
    seq: int


class Anchor(NamedTuple):
    kty: str
    jwk: dict[str, Any]


# -- strict JSON and base64url -------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise ValueError("duplicate member")
        result[name] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


MAX_DEPTH = 64


def _nesting(text: str) -> int:
    """The deepest nesting of arrays and objects, brackets inside strings not counted."""
    deepest = depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def strict_json(text: str | bytes) -> Any:
    """RFC 8259 JSON text; refused (ValueError): a duplicate member name, NaN or Infinity,
    a leading byte order mark in a string, nesting deeper than 64 arrays and objects."""
    if isinstance(text, str) and text.startswith("\ufeff"):
        raise ValueError("a byte order mark is not JSON")
    if _nesting(text.decode("utf-8") if isinstance(text, bytes) else text) > MAX_DEPTH:
        raise ValueError("nested too deep")
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def b64url_decode(text: Any) -> bytes:
    """Unpadded canonical base64url, or ValueError."""
    if not isinstance(text, str) or not B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as error:
        raise ValueError("not base64url") from error
    if b64url(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: a boolean is never a number, types must agree."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


MISSING = object()


def member_equal(a: dict[str, Any], a_name: str, b: dict[str, Any], b_name: str) -> bool:
    """Both members present and equal as JSON values."""
    if a_name not in a or b_name not in b:
        return False
    return json_equal(a[a_name], b[b_name])


# -- keys ---------------------------------------------------------------------------


def thumbprint(jwk: dict[str, Any]) -> str:
    names = ("crv", "kty", "x") if jwk["kty"] == "OKP" else ("crv", "kty", "x", "y")
    return b64url(hashlib.sha256(rfc8785.dumps({n: jwk[n] for n in names})).digest())


def _check_key(jwk: Any) -> None:
    if not isinstance(jwk, dict) or "d" in jwk:
        raise ValueError("not a public JWK")
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if kty == "OKP" and crv == "Ed25519":
        if len(b64url_decode(jwk.get("x"))) != 32:
            raise ValueError("x is not 32 bytes")
        expected_alg = "EdDSA"
    elif kty == "EC" and crv == "P-256":
        _p256_public(jwk)
        expected_alg = "ES256"
    else:
        raise ValueError("unsupported kty/crv")
    _check_optional_members(jwk, expected_alg)


def _p256_public(jwk: dict[str, Any]) -> ec.EllipticCurvePublicKey:
    x, y = b64url_decode(jwk.get("x")), b64url_decode(jwk.get("y"))
    if len(x) != P256_ORDER_BYTES or len(y) != P256_ORDER_BYTES:
        raise ValueError("coordinate length")
    numbers = ec.EllipticCurvePublicNumbers(
        int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()
    )
    return numbers.public_key()


def _check_optional_members(jwk: dict[str, Any], expected_alg: str) -> None:
    if "use" in jwk and jwk["use"] != "sig":
        raise ValueError("use")
    if "alg" in jwk and jwk["alg"] != expected_alg:
        raise ValueError("alg")
    if "key_ops" in jwk:
        ops = jwk["key_ops"]
        if not isinstance(ops, list) or "verify" not in ops:
            raise ValueError("key_ops")
    if "kid" in jwk and jwk["kid"] != thumbprint(jwk):
        raise ValueError("kid is not the thumbprint")


def anchors_of(document: Any) -> dict[str, Anchor]:
    """A JWK or JWK Set, checked by the key rules, indexed by computed thumbprint."""
    if isinstance(document, str | bytes):
        document = strict_json(document)
    if isinstance(document, dict) and "keys" in document:
        keys = document["keys"]
        if not isinstance(keys, list) or not keys:
            raise ValueError("keys is not a non-empty array")
    else:
        keys = [document]
    result: dict[str, Anchor] = {}
    for jwk in keys:
        _check_key(jwk)
        print_ = thumbprint(jwk)
        if print_ in result:
            raise ValueError("two keys with one thumbprint")
        result[print_] = Anchor(jwk["kty"], jwk)
    return result


def reader_anchors(documents: list[Any]) -> dict[str, Anchor]:
    merged: dict[str, Anchor] = {}
    for document in documents:
        try:
            merged.update(anchors_of(document))
        except (ValueError, TypeError, KeyError) as error:
            raise KeyFileRefused(str(error)) from error
    return merged


# -- Merkle (RFC 9162 2.1) -------------------------------------------------------------


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    if index >= size:
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            r = node(p, r)
            while fn != 0 and fn % 2 == 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


# -- step 1: shape ---------------------------------------------------------------------


def _is_seq(value: Any) -> bool:
    return is_int(value) and value >= 1


def _check_shape(bundle: Any) -> None:
    if not isinstance(bundle, dict) or bundle.get("format") not in FORMATS:
        raise Refused("malformed")
    if not isinstance(bundle.get("run_id"), str) or not isinstance(bundle.get("tree_head"), str):
        raise Refused("malformed")
    names = ["events", "tokens", "receipts", "artifacts"]
    if bundle["format"] in (FORMAT, FORMAT_3):
        names.append("hop_receipts")
    lists = [bundle.get(name) for name in names]
    if not all(isinstance(item, list) for item in lists) or not bundle["events"]:
        raise Refused("malformed")
    jwks = bundle.get("jwks")
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise Refused("malformed")
    if not all(_event_shape(e) for e in bundle["events"]):
        raise Refused("malformed")
    entries = bundle["tokens"] + bundle["receipts"] + bundle["artifacts"] + _hop_list(bundle)
    if not all(isinstance(x, dict) and _is_seq(x.get("seq")) for x in entries):
        raise Refused("malformed")
    if not all(isinstance(x.get("content"), str) for x in bundle["artifacts"]):
        raise Refused("malformed")
    if not all(isinstance(k, dict) and "d" not in k for k in jwks["keys"]):
        raise Refused("malformed")
    successions = bundle.get("successions", [])
    if not isinstance(successions, list) or len(successions) > 16:
        raise Refused("malformed")
    if not all(isinstance(statement, str) for statement in successions):
        raise Refused("malformed")


def _hop_list(bundle: dict[str, Any]) -> list[Any]:
    with_hops = bundle["format"] in (FORMAT, FORMAT_3)
    listed: list[Any] = bundle.get("hop_receipts", []) if with_hops else []
    return listed


def _event_shape(event: Any) -> bool:
    if not isinstance(event, dict) or not _is_seq(event.get("seq")):
        return False
    if not isinstance(event.get("hash"), str) or not isinstance(event.get("canonical"), str):
        return False
    proof = event.get("inclusion_proof")
    return isinstance(proof, list) and all(isinstance(p, str) and HEX64.fullmatch(p) for p in proof)


# -- step 2.2: successions ------------------------------------------------------------

IDENTITY = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:"


def _follow(statements: list[str], remote: dict[str, Anchor]) -> dict[str, Anchor]:
    """Passes over the statements, in order, until a pass follows none; each followed
    statement adds its successor to the remote anchors (a copy: R)."""
    reached = dict(remote)
    followed: set[int] = set()
    while True:
        before = len(followed)
        for index, statement in enumerate(statements):
            if index in followed:
                continue
            successor = _successor(statement, reached)
            if successor is not None:
                followed.add(index)
                reached.setdefault(thumbprint(successor), Anchor(successor["kty"], successor))
        if len(followed) == before:
            return reached


def _successor(statement: str, reached: dict[str, Anchor]) -> dict[str, Any] | None:
    """The successor JWK of a statement that 2.2.1 to 2.2.5 accept, else None."""
    parts = statement.split(".")
    if len(parts) != 3:
        return None
    try:
        raw = [b64url_decode(part) for part in parts]
        header = strict_json(raw[0])
    except ValueError:
        return None
    if not isinstance(header, dict) or set(header) != {"alg", "kid", "typ"}:
        return None
    kid = header["kid"]
    anchor = reached.get(kid) if isinstance(kid, str) else None
    if header["typ"] != "key-succession+jwt" or anchor is None:
        return None
    signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
    if not _signature_ok(anchor, header["alg"], parts[2], signing_input):
        return None
    return _named_successor(raw[1], kid)


def _named_successor(payload: bytes, kid: str) -> dict[str, Any] | None:
    try:
        claims = strict_json(payload)
    except ValueError:
        return None
    if not isinstance(claims, dict) or claims.get("iss") != IDENTITY + kid:
        return None
    successor = claims.get("successor")
    try:
        _check_key(successor)
    except (ValueError, TypeError, KeyError):
        return None
    return successor  # type: ignore[no-any-return]


# -- step 3: tree head -----------------------------------------------------------------


class Head(NamedTuple):
    tree_size: int
    root_hash: bytes


def _head_kid(tree_head: str) -> Any:
    try:
        header = strict_json(b64url_decode(tree_head.split(".")[0]))
    except ValueError:
        return None
    return header.get("kid") if isinstance(header, dict) else None


def _check_head(tree_head: str, anchors: dict[str, Anchor], unanchored: bool) -> Head:
    kid = _head_kid(tree_head)
    anchor = anchors.get(kid) if isinstance(kid, str) else None
    if anchor is None or anchor.kty != "OKP":
        raise Refused("head_invalid" if unanchored else "untrusted_key")
    try:
        return _verified_head(tree_head, anchor)
    except (ValueError, InvalidSignature) as error:
        raise Refused("head_invalid") from error


def _verified_head(tree_head: str, anchor: Anchor) -> Head:
    parts = tree_head.split(".")
    if len(parts) != 3:
        raise ValueError("parts")
    header, payload = strict_json(b64url_decode(parts[0])), strict_json(b64url_decode(parts[1]))
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise ValueError("not objects")
    if set(header) != {"alg", "kid", "typ"}:
        raise ValueError("header members")
    if header.get("alg") != "EdDSA" or header.get("typ") != "ledger-tree-head+jwt":
        raise ValueError("header")
    key = Ed25519PublicKey.from_public_bytes(b64url_decode(anchor.jwk["x"]))
    key.verify(b64url_decode(parts[2]), f"{parts[0]}.{parts[1]}".encode("ascii"))
    size: Any = payload.get("tree_size")
    root: Any = payload.get("root_hash")
    if not is_int(size) or size < 1 or not isinstance(root, str) or not HEX64.fullmatch(root):
        raise ValueError("claims")
    if not isinstance(payload.get("issued_at"), str) or not isinstance(payload.get("iss"), str):
        raise ValueError("claims")
    return Head(size, bytes.fromhex(root))


# -- step 4: events --------------------------------------------------------------------

STRING_MEMBERS = ("prev_hash", "event_type", "recorded_at", "actor")
NULLABLE_STRINGS = ("run_id", "handoff_id", "remote_task_id", "trace_id")


def _record_form(record: Any) -> bool:
    if not isinstance(record, dict) or set(record) != RECORD_MEMBERS:
        return False
    if not is_int(record["seq"]) or not all(isinstance(record[m], str) for m in STRING_MEMBERS):
        return False
    if not all(record[m] is None or isinstance(record[m], str) for m in NULLABLE_STRINGS):
        return False
    attempt = record["attempt"]
    return (attempt is None or is_int(attempt)) and isinstance(record["data"], dict)


def _check_event(
    event: dict[str, Any], previous: dict[str, Any] | None, run_id: str, head: Head
) -> dict[str, Any]:
    seq = event["seq"]
    if (previous is not None and seq <= previous["seq"]) or seq > head.tree_size:
        raise Refused("malformed", seq)
    try:
        raw = event["canonical"].encode("utf-8")
    except UnicodeEncodeError as error:
        raise Refused("malformed", seq) from error
    digest = hashlib.sha256(raw).digest()
    if digest.hex() != event["hash"]:
        raise Refused("hash_mismatch", seq)
    record = _record_of(event["canonical"], seq, run_id)
    _check_canonical(record, raw, seq)
    _check_link(record, previous, seq)
    leaf = hashlib.sha256(b"\x00" + digest).digest()
    proof = [bytes.fromhex(p) for p in event["inclusion_proof"]]
    if root_from_inclusion(seq - 1, head.tree_size, leaf, proof) != head.root_hash:
        raise Refused("inclusion_invalid", seq)
    return record


def _record_of(canonical: str, seq: int, run_id: str) -> dict[str, Any]:
    try:
        record = strict_json(canonical)
    except ValueError as error:
        raise Refused("malformed", seq) from error
    if not _record_form(record) or record["seq"] != seq or record["run_id"] != run_id:
        raise Refused("malformed", seq)
    return record


def _check_canonical(record: dict[str, Any], raw: bytes, seq: int) -> None:
    try:
        canonical = rfc8785.dumps(record)
    except Exception as error:  # rfc8785 refuses what it cannot serialise
        raise Refused("not_canonical", seq) from error
    if canonical != raw:
        raise Refused("not_canonical", seq)


def _check_link(record: dict[str, Any], previous: dict[str, Any] | None, seq: int) -> None:
    if seq == 1 and record["prev_hash"] != "0" * 64:
        raise Refused("prev_mismatch", seq)
    linked = previous is not None and previous["seq"] == seq - 1
    if linked and record["prev_hash"] != previous["hash"]:  # type: ignore[index]
        raise Refused("prev_mismatch", seq)


# -- step 5: tokens --------------------------------------------------------------------


def _check_tokens(tokens: list[dict[str, Any]], records: dict[int, dict[str, Any]]) -> None:
    for entry in tokens:
        data = _grant(records.get(entry["seq"]))
        if data is None:
            raise Refused("token_mismatch", entry["seq"])
        if not (
            member_equal(data, "jti", entry, "jti")
            and member_equal(data, "claims_digest", entry, "claims_digest")
        ):
            raise Refused("token_mismatch", entry["seq"])


def _grant(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A grant.minted's data, or the grant object a message.dispatched carries."""
    if record is None:
        return None
    if record["event_type"] == "grant.minted":
        return dict(record["data"])
    grant = record["data"].get("grant") if record["event_type"] == "message.dispatched" else None
    return grant if isinstance(grant, dict) else None


# -- step 6: receipts ------------------------------------------------------------------


def _is_receipt(record: dict[str, Any] | None) -> bool:
    """A handoff.receipt event, or a verdict (artifact.*) with a receipt in its data."""
    if record is None:
        return False
    if record["event_type"] == "handoff.receipt":
        return True
    return record["event_type"].startswith("artifact.") and "receipt" in record["data"]


def _check_listed(bundle: dict[str, Any], records: dict[int, dict[str, Any]]) -> None:
    for entry in bundle["receipts"]:
        record = records.get(entry["seq"])
        kept = record["data"] if record is not None and _is_receipt(record) else None
        if kept is None or not member_equal(kept, "receipt", entry, "receipt"):
            raise Refused("receipt_invalid", entry["seq"])
    seen: set[int] = set()
    for entry in bundle["artifacts"]:
        if not _is_receipt(records.get(entry["seq"])) or entry["seq"] in seen:
            raise Refused("artifact_mismatch", entry["seq"])
        seen.add(entry["seq"])


def _receipt_claims(receipt: Any, anchors: dict[str, Anchor], seq: int) -> dict[str, Any]:
    if not isinstance(receipt, dict) or set(receipt) != {"protected", "payload", "signature"}:
        raise Refused("receipt_invalid", seq)
    if not all(isinstance(v, str) and B64URL.fullmatch(v) for v in receipt.values()):
        raise Refused("receipt_invalid", seq)
    header = _decoded_object(receipt["protected"], seq)
    if set(header) != {"alg", "kid", "typ"} or header["typ"] != "a2a-receipt+jwt":
        raise Refused("receipt_invalid", seq)
    kid = header["kid"]
    anchor = anchors.get(kid) if isinstance(kid, str) else None
    if anchor is None:
        raise Refused("untrusted_key", seq)
    signing_input = f"{receipt['protected']}.{receipt['payload']}".encode("ascii")
    if not _signature_ok(anchor, header["alg"], receipt["signature"], signing_input):
        raise Refused("receipt_invalid", seq)
    claims = _decoded_object(receipt["payload"], seq)
    if claims.get("iss") != IDENTITY + kid:
        raise Refused("receipt_issuer_mismatch", seq)
    return claims


def _decoded_object(part: str, seq: int) -> dict[str, Any]:
    try:
        value = strict_json(b64url_decode(part))
    except ValueError as error:
        raise Refused("receipt_invalid", seq) from error
    if not isinstance(value, dict):
        raise Refused("receipt_invalid", seq)
    return value


def _signature_ok(anchor: Anchor, alg: Any, signature: str, signing_input: bytes) -> bool:
    try:
        raw = b64url_decode(signature)
        if anchor.kty == "OKP" and alg == "EdDSA":
            Ed25519PublicKey.from_public_bytes(b64url_decode(anchor.jwk["x"])).verify(
                raw, signing_input
            )
            return True
        if anchor.kty == "EC" and alg == "ES256" and len(raw) == 64:
            der = encode_dss_signature(
                int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
            )
            _p256_public(anchor.jwk).verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
            return True
    except (ValueError, InvalidSignature):
        return False
    return False


def _task(record: dict[str, Any]) -> tuple[Any, Any]:
    return (record["handoff_id"], record["remote_task_id"])


def _check_binding(
    claims: dict[str, Any], record: dict[str, Any], ordered: list[dict[str, Any]]
) -> None:
    seq = record["seq"]
    attempt: Any = claims.get("attempt")
    kept: Any = record["attempt"]
    checks: list[Callable[[], bool]] = [
        lambda: "handoff_id" in claims and json_equal(claims["handoff_id"], record["handoff_id"]),
        lambda: is_int(attempt) and is_int(kept) and 1 <= attempt <= kept,
        lambda: (
            isinstance(claims.get("task_id"), str) and claims["task_id"] == record["remote_task_id"]
        ),
        lambda: _token_bound(claims, record, ordered),
        lambda: _state_bound(claims, record, ordered),
    ]
    if not all(check() for check in checks):
        raise Refused("receipt_mismatch", seq)


def _token_bound(
    claims: dict[str, Any], record: dict[str, Any], ordered: list[dict[str, Any]]
) -> bool:
    recorded = [_grant(r) for r in ordered if r["handoff_id"] == record["handoff_id"]]
    grants = [grant for grant in recorded if grant is not None]
    jti = claims.get("jti")
    if jti is None:
        return claims.get("req_digest") is None and not grants
    if not isinstance(jti, str):
        return False
    grant = next((g for g in grants if json_equal(g.get("jti", MISSING), jti)), None)
    if grant is None or not member_equal(grant, "req_digest", claims, "req_digest"):
        return False
    return isinstance(claims.get("iss"), str) and member_equal(claims, "iss", grant, "aud")


def _state_bound(
    claims: dict[str, Any], record: dict[str, Any], ordered: list[dict[str, Any]]
) -> bool:
    observed = [
        r
        for r in ordered
        if r["event_type"] == "remote.state_observed" and _task(r) == _task(record)
    ]
    if not observed:
        return False
    return member_equal(claims, "state", observed[-1]["data"], "remote_state")


def _check_artifacts(
    claims: dict[str, Any],
    record: dict[str, Any],
    ordered: list[dict[str, Any]],
    contents: dict[int, str],
) -> None:
    seq = record["seq"]
    if seq not in contents:
        raise Refused("artifact_missing", seq)
    content = contents[seq]
    try:
        artifacts = strict_json(content)
        if not isinstance(artifacts, list) or not all(isinstance(a, dict) for a in artifacts):
            raise ValueError("not an array of objects")
        digest = "sha-256:" + b64url(hashlib.sha256(rfc8785.dumps(artifacts)).digest())
    except Exception as error:  # strict parse or RFC 8785 refusal
        raise Refused("artifact_mismatch", seq) from error
    if not (isinstance(claims.get("artifact_digest"), str) and claims["artifact_digest"] == digest):
        raise Refused("artifact_mismatch", seq)
    later = [
        r
        for r in ordered
        if r["seq"] >= seq and r["event_type"].startswith("artifact.") and _task(r) == _task(record)
    ]
    if later:
        expected = "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()
        if not json_equal(later[0]["data"].get("content_hash", MISSING), expected):
            raise Refused("artifact_mismatch", seq)


def _check_receipts(
    bundle: dict[str, Any], records: dict[int, dict[str, Any]], anchors: dict[str, Anchor]
) -> None:
    _check_listed(bundle, records)
    ordered = [records[s] for s in sorted(records)]
    contents = {entry["seq"]: entry["content"] for entry in bundle["artifacts"]}
    for record in ordered:
        if not _is_receipt(record):
            continue
        claims = _receipt_claims(record["data"].get("receipt"), anchors, record["seq"])
        _check_binding(claims, record, ordered)
        _check_artifacts(claims, record, ordered, contents)


# -- step 7: hop receipts --------------------------------------------------------------


def _check_hops(
    bundle: dict[str, Any], records: dict[int, dict[str, Any]], anchors: dict[str, Anchor]
) -> None:
    for entry in _hop_list(bundle):
        record = records.get(entry["seq"])
        kept = record["data"] if record and record["event_type"] == "hop.receipt" else None
        if kept is None or not member_equal(kept, "receipt", entry, "receipt"):
            raise Refused("receipt_invalid", entry["seq"])
    ordered = [records[s] for s in sorted(records)]
    for record in ordered:
        if record["event_type"] != "hop.receipt":
            continue
        claims = _receipt_claims(record["data"].get("receipt"), anchors, record["seq"])
        if not _hop_bound(claims, record, ordered):
            raise Refused("receipt_mismatch", record["seq"])


def _hop_bound(
    claims: dict[str, Any], record: dict[str, Any], ordered: list[dict[str, Any]]
) -> bool:
    jti = claims.get("jti")
    exchanged = [
        r["data"]
        for r in ordered
        if r["seq"] < record["seq"] and r["event_type"] == "delegation.exchanged"
    ]
    hop = next((h for h in exchanged if isinstance(jti, str) and h.get("jti") == jti), None)
    if hop is None:
        return False
    attempt = claims.get("attempt")
    return (
        member_equal(hop, "parent_handoff_id", record, "handoff_id")
        and member_equal(claims, "handoff_id", hop, "handoff_id")
        and is_int(attempt)
        and attempt == 1
        and claims.get("req_digest") is None
        and isinstance(claims.get("iss"), str)
        and member_equal(claims, "iss", hop, "aud")
        and isinstance(claims.get("task_id"), str)
        and claims.get("state") in TERMINAL
    )


# -- the whole -------------------------------------------------------------------------


def _bundle_anchors(bundle: dict[str, Any]) -> dict[str, Anchor]:
    try:
        return anchors_of(bundle["jwks"])
    except (ValueError, TypeError, KeyError) as error:
        raise Refused("malformed") from error


def _run(
    bundle: Any, coordinator: dict[str, Anchor], remote: dict[str, Anchor], unanchored: bool
) -> Outcome:
    _check_shape(bundle)
    if unanchored:
        coordinator = remote = _bundle_anchors(bundle)
    elif not coordinator:
        raise Refused("no_anchor")
    remote = _follow(bundle.get("successions", []), remote)
    head = _check_head(bundle["tree_head"], coordinator, unanchored)
    records: dict[int, dict[str, Any]] = {}
    previous: dict[str, Any] | None = None
    for event in bundle["events"]:
        records[event["seq"]] = _check_event(event, previous, bundle["run_id"], head)
        previous = event
    _check_tokens(bundle["tokens"], records)
    _check_receipts(bundle, records, remote)
    _check_hops(bundle, records, remote)
    return Outcome("unanchored" if unanchored else "verified", None, 0)


def verify_detailed(
    bundle: Any,
    coordinator_keys: list[Any] | Any | None = None,
    remote_keys: list[Any] | Any | None = None,
    unanchored: bool = False,
) -> Outcome:
    """The verdict on ``bundle`` (parsed JSON, or its text) against the reader's keys.

    Each of ``coordinator_keys`` / ``remote_keys`` is one key document (a JWK or a JWK
    Set, parsed or as text) or a list of them. Raises ``KeyFileRefused`` for a key
    document the key rules refuse, ``ValueError`` for a usage error.
    """
    coordinator = reader_anchors(_as_list(coordinator_keys))
    remote = reader_anchors(_as_list(remote_keys))
    if remote_keys and coordinator_keys is None:
        raise ValueError("remote keys may be given only with a coordinator key")
    if unanchored and (coordinator_keys is not None or remote_keys is not None):
        raise ValueError("--unanchored takes no keys")
    try:
        document = strict_json(bundle) if isinstance(bundle, str | bytes) else bundle
    except ValueError:
        return Outcome("refused", "malformed", 0)
    try:
        return _run(document, coordinator, remote, unanchored)
    except Refused as refusal:
        return Outcome("refused", refusal.reason, refusal.seq)


def _as_list(keys: list[Any] | Any | None) -> list[Any]:
    if keys is None:
        return []
    return keys if isinstance(keys, list) else [keys]


def verify(
    bundle: Any,
    coordinator_keys: list[Any] | Any | None = None,
    remote_keys: list[Any] | Any | None = None,
    unanchored: bool = False,
) -> tuple[str, str | None]:
    """``(verdict, reason_code)``: see the module docstring."""
    outcome = verify_detailed(bundle, coordinator_keys, remote_keys, unanchored)
    return outcome.verdict, outcome.reason
