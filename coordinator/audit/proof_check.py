"""Check a proof bundle offline, step by step as docs/audit-bundle.md specifies.

The steps, each failing with its :class:`~coordinator.audit.log.verification.Break` reason:

1. shape (``malformed``);
2. anchors: the reader's keys; none given is ``no_anchor`` unless a structure-only
   check is asked for, which uses the bundle's own keys and proves nothing; then the
   key successions the bundle carries, followed from the remote anchors only
   (:mod:`coordinator.audit.successions`);
3. the signed tree head, by a coordinator key of the anchors (``untrusted_key``,
   ``head_invalid``);
4. every event: its hash (``hash_mismatch``), its record exactly of the ledger's form,
   this run's and at its place (``malformed``), in RFC 8785 form (``not_canonical``),
   linked to the one before (``prev_mismatch``), included in the head's tree
   (``inclusion_invalid``);
5. tokens: each digest is the one an included event's grant records (a ``grant.minted``, or
   the dispatch that carried it)
   (``token_mismatch``);
6. receipts (:mod:`coordinator.audit.receipt_binding`): every event that records a
   receipt (a ``handoff.receipt``, or a verdict carrying one), listed or not, signed by a
   remote key of the anchors (``untrusted_key``, ``receipt_invalid``), stating what the
   ledger recorded (``receipt_mismatch``), over the artifacts the bundle carries
   (``artifact_missing``, ``artifact_mismatch``);
7. hop receipts (:mod:`coordinator.audit.hop_binding`): every ``hop.receipt`` event,
   listed or not, signed by a remote key of the anchors in its own name, stating the
   child the ledger exchanged from the handoff that carried it (``receipt_mismatch``).

Format 4 bundles find a receipt in the verdict that carries it too, and a grant in the
dispatch that carried it; format 3 bundles, made before, keep every receipt in a
``handoff.receipt`` event and every grant in a ``grant.minted`` one, and still verify, as do format
2 bundles, made before hops were carried, which have no ``hop_receipts`` list (step 7
still checks any ``hop.receipt`` event they hold).

docs/verifier/verify_bundle.py does the same with nothing of ours, and a test checks
that the two agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from agent_cards.transparency import merkle
from agent_cards.transparency.heads import is_hash
from contracts import strict_json
from contracts.canonical import CanonicalizationError, canonical_json
from coordinator.audit import successions
from coordinator.audit.anchors import Anchors
from coordinator.audit.bundles import BUNDLE_FORMAT, verify_bundle
from coordinator.audit.hop_binding import check_hop_receipts
from coordinator.audit.log.events import GENESIS_HASH
from coordinator.audit.log.tree_heads import TreeHead, key_for, verify_tree_head
from coordinator.audit.log.verification import Break, BundleBroken, VerifyReport
from coordinator.audit.proofs import PROOF_FORMAT, PROOF_FORMAT_2, PROOF_FORMAT_3, WITH_HOPS
from coordinator.audit.receipt_binding import check_receipts, same_member
from coordinator.audit.receipts import grant_recorded
from coordinator.errors import LedgerError

NO_ANCHOR_DETAIL = (
    "no key of the reader's was given, so nothing is proven: pass the coordinator's key "
    "(as `federation keys show` prints it) and each remote's, or ask for a structure-only check"
)
# The steps of a proof bundle check, as ``audit verify --bundle`` names them.
PROOF_STEPS = (
    "shape",
    "anchors: the keys given, and the key successions followed from them",
    "tree head: signed by a coordinator key given",
    "events: hash, ledger form, RFC 8785, chain link, inclusion in the tree head",
    "tokens: each the one an included event's grant records",
    "receipts: every event recording a receipt (handoff.receipt, or a verdict carrying one) "
    "signed by a remote key given, in that key's name, stating what the ledger recorded, "
    "over the artifacts the bundle carries",
    "hop receipts: every hop.receipt event signed by a remote key given, in that key's "
    "name, stating the child the ledger exchanged from the handoff that carried it",
)
EXPORT_STEPS = (
    "shape",
    "head and attestation: signed by a coordinator key given",
    "events: hash chain and links up to the signed head, the attestation's digest",
    "receipts: not checked by an export bundle (`audit prove` makes one that is)",
)
# A ledger record's members and their JSON types (None: null allowed).
_TEXT, _TEXT_OR_NULL = (str,), (str, type(None))
RECORD_MEMBERS: dict[str, tuple[type, ...]] = {
    "seq": (int,),
    "prev_hash": _TEXT,
    "event_type": _TEXT,
    "recorded_at": _TEXT,
    "run_id": _TEXT_OR_NULL,
    "handoff_id": _TEXT_OR_NULL,
    "attempt": (int, type(None)),
    "actor": _TEXT,
    "remote_task_id": _TEXT_OR_NULL,
    "trace_id": _TEXT_OR_NULL,
    "data": (dict,),
}


def _shape(bundle: Mapping[str, Any]) -> None:
    if bundle.get("format") not in (PROOF_FORMAT, PROOF_FORMAT_3, PROOF_FORMAT_2):
        raise BundleBroken(0, Break.MALFORMED, f"format is not {PROOF_FORMAT}")
    expected = {
        "run_id": str,
        "tree_head": str,
        "events": list,
        "tokens": list,
        "receipts": list,
        "artifacts": list,
    }
    if bundle["format"] in WITH_HOPS:
        expected["hop_receipts"] = list
    for name, kind in expected.items():
        if not isinstance(bundle.get(name), kind):
            raise BundleBroken(0, Break.MALFORMED, f"{name} is missing or not a {kind.__name__}")
    jwks = bundle.get("jwks")
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise BundleBroken(0, Break.MALFORMED, "jwks is not a JWK Set")
    if not bundle["events"]:
        raise BundleBroken(0, Break.MALFORMED, "the bundle has no events")
    for entry in bundle["events"]:
        if not (
            isinstance(entry, dict)
            and _is_seq(entry.get("seq"))
            and isinstance(entry.get("canonical"), str)
            and isinstance(entry.get("hash"), str)
            and isinstance(entry.get("inclusion_proof"), list)
            and all(is_hash(node) for node in entry["inclusion_proof"])
        ):
            raise BundleBroken(
                0, Break.MALFORMED, "an event is not {seq, hash, canonical, inclusion_proof}"
            )
    for entry in [*bundle["tokens"], *bundle["receipts"], *bundle["artifacts"], *_hops(bundle)]:
        if not isinstance(entry, dict) or not _is_seq(entry.get("seq")):
            raise BundleBroken(0, Break.MALFORMED, "a token, receipt or artifacts entry has no seq")
    if not all(isinstance(entry.get("content"), str) for entry in bundle["artifacts"]):
        raise BundleBroken(0, Break.MALFORMED, "an artifacts entry has no content string")
    for jwk in jwks["keys"]:
        if not isinstance(jwk, dict) or "d" in jwk:
            raise BundleBroken(0, Break.MALFORMED, "a JWK of the bundle is not a public key")
    if not successions.well_formed(bundle):
        raise BundleBroken(0, Break.MALFORMED, "successions is not an array of at most 16 strings")


def _hops(bundle: Mapping[str, Any]) -> list[Any]:
    """The hop receipts a bundle lists (format 2: none)."""
    listed = bundle.get("hop_receipts") if bundle.get("format") in WITH_HOPS else None
    return listed if isinstance(listed, list) else []


def _is_seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _anchors(bundle: Mapping[str, Any], anchors: Anchors | None, unanchored: bool) -> Anchors:
    """Step 2: the reader's keys, or (asked for) the bundle's own."""
    if anchors is not None:
        return anchors
    if not unanchored:
        raise BundleBroken(0, Break.NO_ANCHOR, NO_ANCHOR_DETAIL)
    try:
        return Anchors.of_bundle(bundle["jwks"])
    except LedgerError as exc:
        raise BundleBroken(0, Break.MALFORMED, f"the bundle's keys: {exc}") from None


def _followed(bundle: Mapping[str, Any], anchors: Anchors) -> tuple[Anchors, int]:
    """Step 2.2: the remote anchors, extended by the successions the bundle carries."""
    remotes, count = successions.extended(anchors.remotes, successions.carried(bundle))
    return replace(anchors, remotes=remotes), count


def _head(bundle: Mapping[str, Any], anchors: Anchors) -> tuple[TreeHead, str]:
    """Step 3: the tree head, signed by a coordinator key of the anchors (and its kid)."""
    key = key_for(bundle["tree_head"], anchors.coordinator_jwks())
    if key is None and anchors.anchored:
        raise BundleBroken(0, Break.UNTRUSTED_KEY, "the tree head is not signed by a key given")
    if key is None:
        raise BundleBroken(0, Break.HEAD_INVALID, "no key of the bundle is the tree head's")
    try:
        head = verify_tree_head(bundle["tree_head"], key)
    except LedgerError as exc:
        raise BundleBroken(0, Break.HEAD_INVALID, str(exc)) from None
    if head.tree_size < 1:
        raise BundleBroken(0, Break.HEAD_INVALID, "the tree head is of an empty tree")
    return head, str(key["kid"])


def _record(entry: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """4.3: the record, exactly of the ledger's form, this run's, at its seq, in RFC 8785."""
    seq = entry["seq"]
    try:
        record = strict_json.loads(entry["canonical"])
    except ValueError as exc:
        raise BundleBroken(seq, Break.MALFORMED, f"the event is not JSON: {exc}") from None
    if not (
        isinstance(record, dict)
        and set(record) == set(RECORD_MEMBERS)
        and all(_typed(record[name], kinds) for name, kinds in RECORD_MEMBERS.items())
    ):
        raise BundleBroken(seq, Break.MALFORMED, "the event is not a record of the ledger's form")
    if record["seq"] != seq or record["run_id"] != run_id:
        raise BundleBroken(seq, Break.MALFORMED, "the event is not this run's, or not at its seq")
    try:
        canonical = canonical_json(record) == entry["canonical"].encode("utf-8")
    except (CanonicalizationError, UnicodeEncodeError):
        canonical = False
    if not canonical:
        raise BundleBroken(seq, Break.NOT_CANONICAL, "the event's bytes are not its RFC 8785 form")
    return record


def _typed(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)


def _events(bundle: Mapping[str, Any], head: TreeHead) -> dict[int, dict[str, Any]]:
    """Step 4: each event's hash, record, link and inclusion; the records by seq."""
    records: dict[int, dict[str, Any]] = {}
    previous: tuple[int, str] | None = None
    for entry in bundle["events"]:
        seq = entry["seq"]
        if (previous is not None and seq <= previous[0]) or seq > head.tree_size:
            raise BundleBroken(seq, Break.MALFORMED, "events are not in order within the tree head")
        try:
            raw = hashlib.sha256(entry["canonical"].encode("utf-8")).digest()
        except UnicodeEncodeError:
            raise BundleBroken(seq, Break.MALFORMED, "the event is not UTF-8 text") from None
        if raw.hex() != entry["hash"]:
            raise BundleBroken(seq, Break.HASH_MISMATCH, "the event does not match its hash")
        record = _record(entry, bundle["run_id"])
        linked = previous is None or previous[0] != seq - 1 or record["prev_hash"] == previous[1]
        if not linked:
            raise BundleBroken(
                seq, Break.PREV_MISMATCH, f"prev_hash does not match event {seq - 1}"
            )
        if seq == 1 and record["prev_hash"] != GENESIS_HASH:
            raise BundleBroken(seq, Break.PREV_MISMATCH, "the first event does not start the chain")
        proof = [bytes.fromhex(node) for node in entry["inclusion_proof"]]
        leaf = merkle.leaf_hash(raw)
        if not merkle.verify_inclusion(seq - 1, head.tree_size, leaf, proof, head.root):
            raise BundleBroken(
                seq, Break.INCLUSION_INVALID, "the inclusion proof does not yield the root"
            )
        records[seq] = record
        previous = (seq, entry["hash"])
    return records


def _tokens(bundle: Mapping[str, Any], records: Mapping[int, Mapping[str, Any]]) -> None:
    for token in bundle["tokens"]:
        record = records.get(token["seq"]) or {}
        grant = grant_recorded(record.get("event_type", ""), record.get("data") or {})
        if not (
            grant is not None
            and same_member(grant, "jti", token, "jti")
            and same_member(grant, "claims_digest", token, "claims_digest")
        ):
            raise BundleBroken(
                token["seq"], Break.TOKEN_MISMATCH, "not what the included event records"
            )


def verify_proof_bundle(
    bundle: Mapping[str, Any], anchors: Anchors | None = None, *, unanchored: bool = False
) -> VerifyReport:
    """Check a bundle from :func:`~coordinator.audit.proofs.prove_run` offline against
    the reader's ``anchors``. Without them the answer is ``no_anchor``, unless
    ``unanchored`` asks for a structure-only check with the bundle's own keys, whose
    report says it proves nothing (``anchored`` false)."""
    try:
        _shape(bundle)
        keys, followed = _followed(bundle, _anchors(bundle, anchors, unanchored))
        head, head_kid = _head(bundle, keys)
        records = _events(bundle, head)
        _tokens(bundle, records)
        receipts = check_receipts(bundle, records, keys.remotes)
        receipts += check_hop_receipts(_hops(bundle), records, keys.remotes)
    except BundleBroken as failed:
        return failed.report()
    last: Mapping[str, Any] = bundle["events"][-1]
    return VerifyReport(
        True,
        len(records),
        int(last["seq"]),
        str(last["hash"]),
        root_hash=head.root_hash,
        tree_heads=1,
        anchored=keys.anchored,
        successions=followed,
        steps=PROOF_STEPS,
        head_kid=head_kid,
        tokens=len(bundle["tokens"]),
        receipts=tuple(receipts),
    )


def verify_document(
    bundle: Mapping[str, Any], anchors: Anchors | None = None, *, unanchored: bool = False
) -> VerifyReport:
    """``audit verify --bundle``: a proof bundle, or a run bundle of ``audit export``
    (``ledger-bundle/1``) whose head must then be signed by a coordinator key given."""
    if bundle.get("format") != BUNDLE_FORMAT:
        return verify_proof_bundle(bundle, anchors, unanchored=unanchored)
    if anchors is None and not unanchored:
        return BundleBroken(0, Break.NO_ANCHOR, NO_ANCHOR_DETAIL).report()
    if anchors is None:
        return replace(verify_bundle(bundle), anchored=False, steps=EXPORT_STEPS)
    head = bundle.get("head")
    key = key_for(head, anchors.coordinator_jwks()) if isinstance(head, str) else None
    if key is None:
        detail = "the bundle's head is not signed by a key given"
        return BundleBroken(0, Break.UNTRUSTED_KEY, detail).report()
    return replace(verify_bundle(bundle, key), steps=EXPORT_STEPS, head_kid=str(key["kid"]))
