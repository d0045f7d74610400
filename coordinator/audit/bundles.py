"""Run bundles (format ``a2a-federation.ledger-bundle/1``, ``federation audit export``).

A self-contained JSON document that lets a third party check one run offline against the
hash chain: the run's full events, the ``(seq, prev_hash, hash)`` skeleton of the whole
chain up to the head, the signed chain head, a signed attestation of the events and
skeleton, and the public JWK. The Merkle proof bundle (:mod:`coordinator.audit.proofs`,
``federation audit prove``) discloses less (no skeleton) and proves more (inclusion
against a signed tree head); this format stays for the bundles already handed out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import (
    CORRELATION_FIELDS,
    StoredEvent,
    canonical_bytes,
    record_hash,
    timestamp,
)
from coordinator.audit.log.signing import (
    HEAD_TYP,
    head_claims,
    public_jwk,
    sign,
    thumbprint,
    verified_claims,
    verify_head,
)
from coordinator.audit.log.verification import Break, Links, VerifyReport, against_head
from coordinator.errors import LedgerError

BUNDLE_TYP = "ledger-bundle+jwt"
BUNDLE_FORMAT = "a2a-federation.ledger-bundle/1"


def _bundle_digest(run_id: str, events: list[Any], chain: list[Any]) -> str:
    document = {"run_id": run_id, "events": events, "chain": chain}
    return hashlib.sha256(canonical_bytes(document)).hexdigest()


def _event_document(event: StoredEvent) -> dict[str, Any]:
    document = {name: getattr(event, name) for name in ("seq", "prev_hash", *CORRELATION_FIELDS)}
    document.update(recorded_at=timestamp(event.recorded_at), data=event.data, hash=event.hash)
    return document


def export_bundle(
    ledger: Ledger,
    run_id: str,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A self-contained JSON document that lets a third party check one run offline.

    It holds the run's full events, the ``(seq, prev_hash, hash)`` skeleton of the whole
    chain up to the head, the signed head, and a signed attestation of the SHA-256 of
    the events and skeleton (so that the skeleton entries, which a reader cannot
    recompute, cannot be rewritten either), plus the public JWK. Other runs' contents are
    not disclosed.
    """
    seq, digest = ledger.head()
    chain = [list(entry) for entry in ledger.skeleton(up_to=seq)]
    events = [_event_document(e) for e in ledger.events(run_id) if e.seq <= seq]
    head = head_claims(seq, digest, issuer, now)
    attestation = {
        **head,
        "run_id": run_id,
        "bundle_sha256": _bundle_digest(run_id, events, chain),
    }
    return {
        "format": BUNDLE_FORMAT,
        "run_id": run_id,
        "events": events,
        "chain": chain,
        "head": sign(head, private_key, HEAD_TYP),
        "attestation": sign(attestation, private_key, BUNDLE_TYP),
        "public_jwk": public_jwk(private_key),
    }


def _bundle_shape(bundle: Mapping[str, Any]) -> str | None:
    """What is missing from a bundle's shape, if anything."""
    if bundle.get("format") != BUNDLE_FORMAT:
        return f"format is not {BUNDLE_FORMAT}"
    expected = {"run_id": str, "events": list, "chain": list, "head": str, "attestation": str}
    for name, kind in expected.items():
        if not isinstance(bundle.get(name), kind):
            return f"{name} is missing or not a {kind.__name__}"
    if not isinstance(bundle.get("public_jwk"), dict):
        return "public_jwk is missing"
    for entry in bundle["chain"]:
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], int)
            and all(isinstance(part, str) for part in entry[1:])
        ):
            return "a chain entry is not [seq, prev_hash, hash]"
    if not all(isinstance(e, dict) and isinstance(e.get("seq"), int) for e in bundle["events"]):
        return "an event is not an object with a seq"
    return None


def _check_events(links: Links, bundle: Mapping[str, Any]) -> VerifyReport | None:
    """Recompute each full event's hash and place it on the skeleton."""
    chain = {entry[0]: entry for entry in bundle["chain"]}
    for document in bundle["events"]:
        record = {name: value for name, value in document.items() if name != "hash"}
        seq = record["seq"]
        if seq not in chain or record.get("run_id") != bundle["run_id"]:
            return links.broken(seq, Break.MALFORMED, "event is not in the chain or not this run's")
        try:
            digest = record_hash(record)
        except LedgerError as exc:
            return links.broken(seq, Break.HASH_MISMATCH, str(exc))
        if digest != document.get("hash") or digest != chain[seq][2]:
            return links.broken(seq, Break.HASH_MISMATCH, "the event does not match its hash")
        if record.get("prev_hash") != chain[seq][1]:
            return links.broken(seq, Break.PREV_MISMATCH, "prev_hash differs from the chain's")
    return None


def _bundle_key(
    bundle: Mapping[str, Any], trusted: Mapping[str, Any] | None
) -> tuple[Mapping[str, Any], str | None]:
    key: Mapping[str, Any] = bundle["public_jwk"]
    if trusted is None:
        return key, None
    try:
        same = thumbprint(trusted) == thumbprint(key)
    except (KeyError, TypeError, rfc8785.CanonicalizationError):
        same = False
    return trusted, None if same else "the bundle is signed by another key than the trusted one"


def verify_bundle(
    bundle: Mapping[str, Any], trusted_public_jwk: Mapping[str, Any] | None = None
) -> VerifyReport:
    """Check a bundle from :func:`export_bundle` offline.

    Without ``trusted_public_jwk`` the bundle is checked against the key it carries, which
    only shows that it is internally consistent; pass the ledger's published key to know
    who vouches for it.
    """
    links = Links()
    shape = _bundle_shape(bundle)
    if shape is not None:
        return links.broken(0, Break.MALFORMED, shape)
    key, untrusted = _bundle_key(bundle, trusted_public_jwk)
    if untrusted is not None:
        return links.broken(0, Break.UNTRUSTED_KEY, untrusted)
    try:
        head = verify_head(bundle["head"], key)
        attestation = verified_claims(bundle["attestation"], key, BUNDLE_TYP)
    except LedgerError as exc:
        return links.broken(0, Break.HEAD_INVALID, str(exc))
    for seq, prev_hash, digest in bundle["chain"]:
        broken = links.step(seq, prev_hash, digest)
        if broken is not None:
            return broken
    broken = _check_events(links, bundle)
    if broken is not None:
        return broken
    if links.last_seq > head["seq"]:
        return links.broken(head["seq"] + 1, Break.MALFORMED, "the chain runs past the signed head")
    report = against_head(links.ok(), head, links.last_hash)
    if not report.ok:
        return report
    digest = _bundle_digest(bundle["run_id"], bundle["events"], bundle["chain"])
    if attestation.get("bundle_sha256") != digest or attestation.get("seq") != head["seq"]:
        return links.broken(
            0, Break.ATTESTATION_INVALID, "events or chain differ from what was signed"
        )
    return report
