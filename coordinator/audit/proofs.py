"""Proofs for outsiders: a run's proof bundle, and consistency between two tree heads.

``federation audit prove RUN_ID`` writes :func:`prove_run`'s document (format
``a2a-federation.audit-proof/4``, specified in docs/audit-bundle.md): the run's events as
their exact RFC 8785 bytes, each with its RFC 9162 inclusion proof against one signed
tree head, the delegation tokens' claims digests, the remotes' receipts and the hops'
receipts (``hop_receipts``: those of the agents a member delegated to, which the member
carried up) found among those events, the exact artifacts each remote's receipt covers
(as received, from the ``artifacts`` table), and the public keys involved as a JWK Set,
the hops' agents' included (a convenience: a reader checks against keys of its own).
Nothing of other runs is disclosed: a proof node is a hash of a subtree. Format 3 is
format 2 with ``hop_receipts``; format 4 is format 3 with a receipt also found in the
verdict on the return it came with (an ``artifact.*`` event) and a grant in the dispatch
that carried it (a ``message.dispatched``'s ``grant``). A reader of an older format
refuses a newer one (``malformed``) rather than pass receipts or hops it does not check,
and the verifiers here still check format 2 and 3 bundles.

Before it signs a head, :func:`sign_current_head` verifies the whole ledger (chain, tree,
kept heads), so a tampered ledger is never vouched for; the head is then kept in
``tree_heads``. ``federation audit consistency`` uses :func:`prove_consistency`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select

from agent_cards.jws import b64url_decode
from agent_cards.transparency import merkle
from agent_cards.transparency.receipts import artifact_digest
from agent_cards.transparency.succession import MAX_SUCCESSIONS, SUCCESSIONS
from contracts import strict_json
from coordinator.audit import successions as succession_chains
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.signing import public_jwk
from coordinator.audit.log.tree_heads import TreeHead, TreeHeadStore, consistent, sign_tree_head
from coordinator.audit.log.verification import verify
from coordinator.audit.receipts import (
    HOP_RECEIPT_EVENT,
    grant_recorded,
    protected_header,
    records_receipt,
)
from coordinator.errors import LedgerError
from coordinator.storage.schema import artifacts as artifacts_table

PROOF_FORMAT = "a2a-federation.audit-proof/4"
# Bundles made before verdicts carried receipts and dispatches grants (every receipt a
# handoff.receipt event, every grant a grant.minted one),
# and before that before hop receipts (no ``hop_receipts`` member): still verified.
PROOF_FORMAT_3 = "a2a-federation.audit-proof/3"
PROOF_FORMAT_2 = "a2a-federation.audit-proof/2"
# The formats with ``hop_receipts``.
WITH_HOPS = (PROOF_FORMAT, PROOF_FORMAT_3)


def ledger_tree(ledger: Ledger, size: int) -> merkle.Tree:
    """The Merkle tree over the ledger's first ``size`` events."""
    hashes = ledger.hashes(up_to=size)
    if len(hashes) != size:
        raise LedgerError(f"the ledger holds {len(hashes)} of {size} events", "truncated")
    return merkle.Tree(merkle.leaf_hash(bytes.fromhex(digest)) for digest in hashes)


def sign_current_head(
    ledger: Ledger,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    keys: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> TreeHead:
    """Verify the whole ledger, then sign and keep a head over all of it."""
    report = verify(ledger.engine, keys=keys)
    if not report.ok:
        raise LedgerError(
            f"the ledger does not verify, so no head is signed: {report}", "ledger_broken"
        )
    head = sign_tree_head(
        report.last_seq, bytes.fromhex(report.root_hash), private_key, issuer=issuer, now=now
    )
    return TreeHeadStore(ledger.engine).keep(head)


def _event_entry(seq: int, digest: str, canonical: str, tree: merkle.Tree) -> dict[str, Any]:
    proof = tree.inclusion_proof(seq - 1)
    return {
        "seq": seq,
        "hash": digest,
        "canonical": canonical,
        "inclusion_proof": [node.hex() for node in proof],
    }


def _facts(entries: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any], list[Any]]:
    """The tokens' claims digests, the receipts and the hop receipts among the run's
    events."""
    tokens, receipts, hops = [], [], []
    for entry in entries:
        record = json.loads(entry["canonical"])
        data = record.get("data") or {}
        grant = grant_recorded(record.get("event_type", ""), data)
        if grant is not None and "claims_digest" in grant:
            tokens.append(
                {
                    "seq": entry["seq"],
                    "jti": grant.get("jti"),
                    "claims_digest": grant["claims_digest"],
                }
            )
        elif records_receipt(record.get("event_type", ""), data) and "receipt" in data:
            receipts.append({"seq": entry["seq"], "receipt": data["receipt"]})
        elif record.get("event_type") == HOP_RECEIPT_EVENT and "receipt" in data:
            hops.append({"seq": entry["seq"], "receipt": data["receipt"]})
    return tokens, receipts, hops


def kept_artifacts(ledger: Ledger, run_id: str) -> list[str]:
    """The exact artifacts (wire JSON as received) the run store kept for ``run_id``."""
    query = select(artifacts_table.c.content).where(artifacts_table.c.run_id == run_id)
    with ledger.engine.connect() as connection:
        return [row[0] for row in connection.execute(query) if isinstance(row[0], str)]


def _receipt_artifacts(
    receipts: Sequence[Mapping[str, Any]], kept: Sequence[str]
) -> list[dict[str, Any]]:
    """Per receipt, the kept artifacts whose RFC 8785 digest is the one it signed (none
    returned: ``[]``); a receipt whose artifacts were not kept gets no entry."""
    by_digest = {_digest_of(content): content for content in ["[]", *kept]}
    entries = []
    for receipt in receipts:
        digest = _claims(receipt["receipt"]).get("artifact_digest")
        if isinstance(digest, str) and digest in by_digest:
            entries.append({"seq": receipt["seq"], "content": by_digest[digest]})
    return entries


def _digest_of(content: str) -> str | None:
    try:
        value = strict_json.loads(content)
        return artifact_digest(value) if isinstance(value, list) else None
    except (ValueError, TypeError):
        return None


def _claims(jws: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of a kept receipt, unverified (to pick its artifacts)."""
    try:
        value = strict_json.loads(b64url_decode(str(jws["payload"])))
    except (KeyError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _receipt_kids(receipts: Sequence[Mapping[str, Any]]) -> set[str]:
    kids = set()
    for receipt in receipts:
        kid = protected_header(receipt["receipt"]).get("kid")
        if isinstance(kid, str):
            kids.add(kid)
    return kids


def prove_run(
    ledger: Ledger,
    run_id: str,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    keys: Mapping[str, Any] | None = None,
    remote_keys: Sequence[Mapping[str, Any]] = (),
    successions: Sequence[str] = (),
    artifacts: Sequence[str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The proof bundle of ``run_id`` against a head signed now over the whole ledger.

    ``keys`` (the coordinator's published JWK Set) lets the ledger check earlier heads'
    signatures first; ``remote_keys`` are the public JWKs pinned for the remotes, of which
    those that signed one of the run's receipts or hop receipts, or start a chain of
    ``successions`` (the key-succession statements the remotes' pins followed) to such a
    key, go into the bundle with that chain; ``artifacts`` the exact artifacts received in the run
    (default: those the run store kept).
    """
    head = sign_current_head(ledger, private_key, issuer=issuer, keys=keys, now=now)
    records = ledger.records(run_id, up_to=head.tree_size)
    if not records:
        raise LedgerError(f"the ledger has no events of run {run_id!r}", "unknown_run")
    tree = ledger_tree(ledger, head.tree_size)
    if tree.root() != head.root:
        raise LedgerError("the ledger changed under the head just signed", "ledger_broken")
    events = [_event_entry(seq, digest, body, tree) for seq, digest, body in records]
    tokens, receipts, hops = _facts(events)
    chains, kids = _chains(remote_keys, successions, _receipt_kids([*receipts, *hops]))
    jwks = [public_jwk(private_key), *(k for k in remote_keys if k.get("kid") in kids)]
    bundle = {
        "format": PROOF_FORMAT,
        "run_id": run_id,
        "tree_head": head.jws,
        "events": events,
        "tokens": tokens,
        "receipts": receipts,
        "hop_receipts": hops,
        "artifacts": _receipt_artifacts(
            receipts, kept_artifacts(ledger, run_id) if artifacts is None else artifacts
        ),
        "jwks": {"keys": [dict(key) for key in jwks]},
    }
    return bundle | ({SUCCESSIONS: chains} if chains else {})


def _chains(
    remote_keys: Sequence[Mapping[str, Any]], statements: Sequence[str], kids: set[str]
) -> tuple[list[str], set[str]]:
    """The statements that lead from pinned keys to the receipts' keys, and the kids of
    the keys the bundle names; more than a verifier follows is refused, not written."""
    chains, needed = succession_chains.vouching(remote_keys, statements, kids)
    if len(chains) > MAX_SUCCESSIONS:
        raise LedgerError(
            f"the run's receipts need {len(chains)} key-succession statements, more than "
            f"the {MAX_SUCCESSIONS} a bundle may carry",
            "successions_too_many",
        )
    return chains, needed


def prove_consistency(ledger: Ledger, first: TreeHead, second: TreeHead) -> dict[str, Any]:
    """Whether the larger of two (verified) heads extends the smaller, with the proof
    from this ledger: ``consistent``, ``reason`` (``root_mismatch`` when this ledger's
    tree of the larger size has another root, ``inconsistent`` when the smaller head's
    tree is not a prefix of it: a fork) and the proof's nodes."""
    old, new = sorted((first, second), key=lambda head: head.tree_size)
    document: dict[str, Any] = {"old": old.as_dict(), "new": new.as_dict(), "proof": []}
    try:
        tree = ledger_tree(ledger, new.tree_size)
    except LedgerError as exc:
        return {**document, "consistent": False, "reason": exc.reason, "detail": str(exc)}
    if tree.root() != new.root:
        detail = f"this ledger's tree of {new.tree_size} events has another root than the head"
        return {**document, "consistent": False, "reason": "root_mismatch", "detail": detail}
    proof = tree.consistency_proof(old.tree_size)
    document["proof"] = [node.hex() for node in proof]
    if not consistent(old, new, proof):
        detail = f"the head of {old.tree_size} events is not a prefix of this ledger: a fork"
        return {**document, "consistent": False, "reason": "inconsistent", "detail": detail}
    detail = f"the tree of {new.tree_size} events extends the tree of {old.tree_size}"
    return {**document, "consistent": True, "reason": None, "detail": detail}
