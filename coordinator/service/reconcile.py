"""``federation audit reconcile RUN_ID``: do both sides of each handoff tell the same story?

For every handoff of the run sent to an agent that keeps an audit log (the receipts
extension), the remote's entries of that handoff are fetched from its operator routes
(``GET /audit/handoffs/{id}``, with the remote's audit token), each checked to be
included in the remote's signed tree head (verified with the key pinned for the agent).
Then, per handoff, the coordinator's facts (the tokens it minted, the receipt it
verified and kept, the task and state it observed) are set beside the remote's (its
decision and receipt entries): ``jti``, ``task_id``, ``req_digest``, ``artifact_digest``,
``state``, each ``agree`` or not.

And each side witnesses the other: the remote's current log must extend every head of it
the coordinator kept from receipts (``GET /audit/consistency?from=N``, verified here),
and the coordinator's ledger must extend every head of it the remote kept from tokens
(``GET /audit/witnessed``, proven from this ledger). A forked log shows as
``inconsistent``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from agent_cards.transparency import merkle
from agent_cards.transparency.heads import Head, extends, verify_head
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.trusted import TrustedKeys
from contracts.request_digest import request_digest
from coordinator.audit import proofs
from coordinator.audit.chain import Ledger
from coordinator.audit.receipts import GRANT_EVENT, RECEIPT_EVENT, compact
from coordinator.audit.tree_heads import TreeHeadStore, verify_with_jwks
from coordinator.errors import LedgerError, ProtocolError, TransportError, UsageError
from coordinator.remote.registry import RegisteredAgent, origin_of

TOKEN_ENV = "FEDERATION_REMOTE_AUDIT_TOKEN"
FIELDS = ("jti", "task_id", "req_digest", "artifact_digest", "state")
_NO_REQUEST = request_digest({})  # what a cancel token binds


class RemoteAudit:
    """The operator routes of one remote's audit log."""

    def __init__(self, agent: RegisteredAgent, token: str | None, timeout: float = 10.0) -> None:
        self.agent = agent
        self.keys = TrustedKeys.from_json(agent.pinned_jwks or {"keys": []})
        self._base = origin_of(agent.card_url)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        try:
            response = httpx.get(
                self._base + path, params=params, headers=self._headers, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise TransportError(f"{self.agent.name}: {exc}", "remote_unavailable") from None
        if response.status_code != 200:
            reason = (
                "remote_audit_refused" if response.status_code in (401, 404) else "remote_error"
            )
            raise ProtocolError(
                f"{self.agent.name} answered {response.status_code} for {path}", reason
            )
        document: dict[str, Any] = response.json()
        return document

    def head(self, jws: Any) -> Head:
        try:
            return verify_head(jws, self.keys)
        except StatementInvalid as exc:
            raise UsageError(f"{self.agent.name}'s tree head: {exc}", "head_invalid") from None


# --- the coordinator's side ------------------------------------------------------------------


def _receipt_claims(receipt: Mapping[str, Any]) -> dict[str, Any]:
    payload = compact(receipt).split(".")[1]
    claims: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return claims


def our_facts(ledger: Ledger, run_id: str) -> dict[str, dict[str, Any]]:
    """Per handoff: the audience, and what the ledger says of jti, task, digests, state."""
    facts: dict[str, dict[str, Any]] = {}
    for event in ledger.events(run_id):
        if event.handoff_id is None:
            continue
        mine = facts.setdefault(event.handoff_id, {"aud": None, **dict.fromkeys(FIELDS)})
        if event.remote_task_id:
            mine["task_id"] = event.remote_task_id
        if event.event_type == GRANT_EVENT and event.data.get("req_digest") != _NO_REQUEST:
            mine.update(aud=event.data.get("aud"), jti=event.data.get("jti"))
            mine["req_digest"] = event.data.get("req_digest")
        remote_state = event.data.get("remote_state")
        if isinstance(remote_state, str):
            mine["state"] = remote_state
        if event.event_type == RECEIPT_EVENT:
            claims = _receipt_claims(event.data["receipt"])
            mine.update({name: claims.get(name) for name in FIELDS})
    return facts


# --- the remote's side -----------------------------------------------------------------------


def _included(entry: Mapping[str, Any], head: Head) -> dict[str, Any] | None:
    """The entry's record if it is included in ``head``'s tree (hash and proof), else None."""
    canonical = str(entry.get("canonical", ""))
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    proof = [bytes.fromhex(node) for node in entry.get("inclusion_proof", [])]
    seq = entry.get("seq")
    if digest.hex() != entry.get("hash") or not isinstance(seq, int):
        return None
    leaf = merkle.leaf_hash(digest)
    if not merkle.verify_inclusion(seq - 1, head.tree_size, leaf, proof, head.root):
        return None
    record: dict[str, Any] = json.loads(canonical)
    return record


def their_facts(remote: RemoteAudit, handoff_id: str) -> dict[str, Any]:
    """What the remote's log says of ``handoff_id``, every entry proven in its head."""
    document = remote.get(f"/audit/handoffs/{handoff_id}")
    head = remote.head(document.get("tree_head"))
    theirs: dict[str, Any] = {**dict.fromkeys(FIELDS), "entries": 0, "proven": True}
    for entry in document.get("entries", []):
        record = _included(entry, head)
        if record is None:
            theirs["proven"] = False
            continue
        theirs["entries"] += 1
        data = record.get("data") or {}
        if record.get("kind") == "decision" and data.get("allowed") and data.get("req_digest"):
            theirs.update(jti=data.get("jti"), req_digest=data.get("req_digest"))
        if record.get("kind") == "receipt":
            theirs.update({name: data.get(name) for name in FIELDS})
    return theirs


def compared(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    fields = {
        name: {
            "coordinator": ours.get(name),
            "remote": theirs.get(name),
            "agree": ours.get(name) == theirs.get(name) and ours.get(name) is not None,
        }
        for name in FIELDS
    }
    agree = all(field["agree"] for field in fields.values()) and bool(theirs.get("proven"))
    return {"fields": fields, "proven": theirs.get("proven"), "agree": agree}


# --- each side witnesses the other -----------------------------------------------------------


def remote_extends_our_heads(remote: RemoteAudit, kept: Sequence[Head]) -> list[dict[str, Any]]:
    """For each head of the remote's log we kept: does its current log extend it?"""
    results = []
    for old in kept:
        document = remote.get("/audit/consistency", **{"from": old.tree_size})
        new = remote.head(document.get("tree_head"))
        proof = [bytes.fromhex(node) for node in document.get("proof", [])]
        ok = new.tree_size >= old.tree_size and extends(old, new, proof)
        results.append(_consistency(old.tree_size, new.tree_size, ok))
    return results


def ours_extends_their_heads(
    ledger: Ledger, heads: Sequence[str], jwks: Mapping[str, Any], current: Any
) -> list[dict[str, Any]]:
    """For each head of our ledger the remote kept: does our ledger now extend it?"""
    results = []
    for jws in heads:
        try:
            old = verify_with_jwks(jws, jwks)
        except LedgerError as exc:
            results.append({"tree_size": None, "consistent": False, "reason": exc.reason})
            continue
        proven = proofs.prove_consistency(ledger, old, current)
        results.append(
            {**_consistency(old.tree_size, current.tree_size, proven["consistent"]),
             "reason": proven["reason"]}
        )  # fmt: skip
    return results


def _consistency(old: int, new: int, ok: bool) -> dict[str, Any]:
    return {
        "tree_size": old,
        "against": new,
        "consistent": ok,
        "reason": None if ok else "inconsistent",
    }


def witnessed_heads(ledger: Ledger, remote: RemoteAudit) -> list[Head]:
    """The remote's heads this coordinator kept from its receipts, re-verified."""
    kept = []
    for head in TreeHeadStore(ledger.engine).witnessed(remote.agent.agent_id):
        kept.append(remote.head(head.jws))
    return kept
