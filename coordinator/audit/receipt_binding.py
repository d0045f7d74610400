"""Step 6 of a proof bundle check (docs/audit-bundle.md): the remotes' receipts.

Every event among the bundle's verified events that records a receipt (a
``handoff.receipt``, or a verdict that carries one: :func:`records_receipt`) is checked,
whether or not the bundle's ``receipts`` list names it: its signature with a remote key the reader
holds (by computed thumbprint), in the name of that key's identity and no other (its
``iss``: holding several agents' keys never lets one sign for another), then what it
states against what the coordinator's ledger recorded (task, handoff, token, audience,
final state), then its artifact digest against the exact artifacts the bundle carries.
The coordinator's own check before return admission is
:mod:`coordinator.handoff.receipt_check`; this one lets a third party catch either side
lying afterwards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from agent_cards.transparency.receipts import RECEIPT_TYP, artifact_digest
from agent_cards.transparency.statements import (
    ISSUER_MISMATCH,
    StatementInvalid,
    unverified_header,
    verify_statement,
)
from agent_cards.trusted import TrustedKeys
from contracts import strict_json
from coordinator.audit.log.events import admission_in
from coordinator.audit.log.verification import Break, BundleBroken
from coordinator.audit.receipts import (
    VERDICT_PREFIX,
    compact,
    grant_recorded,
    records_receipt,
)

Records = Mapping[int, Mapping[str, Any]]
STATE_EVENT = "remote.state_observed"
_JWS_MEMBERS = {"protected", "payload", "signature"}
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def check_receipts(
    bundle: Mapping[str, Any], records: Records, remotes: TrustedKeys
) -> list[dict[str, Any]]:
    """Steps 6.1 to 6.3: the list, the artifacts' entries, then every receipt event; what
    was checked of each receipt (its event, handoff, agent, the kid that verified it)."""
    for entry in bundle["receipts"]:
        _listed(entry, records)
    artifacts = _artifact_entries(bundle["artifacts"], records)
    checked = []
    for seq in sorted(records):
        if _records_receipt(records[seq]):
            claims = verified_claims(seq, records[seq], remotes)
            _bound(seq, records[seq], claims, records)
            _artifacts_match(seq, records[seq], claims, artifacts.get(seq), records)
            checked.append(_described(seq, records, claims))
    return checked


def _described(seq: int, records: Records, claims: Mapping[str, Any]) -> dict[str, Any]:
    """A verified receipt for its reader: the kid in its header is the thumbprint of the
    key that verified it (keys are found by thumbprint); the agent is the name the
    coordinator admitted the handoff for, as its ledger recorded it."""
    record = records[seq]
    admitted = [
        (admission_in(r["event_type"], r["data"]) or {}).get("contract")
        for r in records.values()
        if r["handoff_id"] == record["handoff_id"]
    ]
    agent = next((c.get("target") for c in admitted if isinstance(c, dict)), None)
    return {
        "seq": seq,
        "handoff_id": record["handoff_id"],
        "agent": agent,
        "kid": unverified_header(compact(record["data"]["receipt"])).get("kid"),
        "iss": claims.get("iss"),
    }


def _listed(entry: Mapping[str, Any], records: Records) -> None:
    record = records.get(entry["seq"]) or {}
    if not _records_receipt(record) or record["data"].get("receipt") != entry.get("receipt"):
        raise BundleBroken(
            entry["seq"], Break.RECEIPT_INVALID, "not the receipt the included event keeps"
        )


def _artifact_entries(entries: list[Mapping[str, Any]], records: Records) -> dict[int, str]:
    """``receipt seq -> content``; an entry for no receipt event, or a second one, fails."""
    found: dict[int, str] = {}
    for entry in entries:
        seq = entry["seq"]
        if not _records_receipt(records.get(seq) or {}) or seq in found:
            raise BundleBroken(seq, Break.ARTIFACT_MISMATCH, "not the artifacts of one receipt")
        found[seq] = entry["content"]
    return found


def _records_receipt(record: Mapping[str, Any]) -> bool:
    return bool(record) and records_receipt(record["event_type"], record["data"])


def verified_claims(seq: int, record: Mapping[str, Any], remotes: TrustedKeys) -> dict[str, Any]:
    """6.3.1 and 6.3.2 (and 7.2.1, 7.2.2 for a hop receipt): the claims of the receipt the
    record keeps, verified with a remote key given, in that key's own name."""
    jws = record["data"].get("receipt")
    if not (
        isinstance(jws, dict)
        and set(jws) == _JWS_MEMBERS
        and all(
            isinstance(jws[name], str) and _BASE64URL.fullmatch(jws[name]) for name in _JWS_MEMBERS
        )
    ):
        raise BundleBroken(seq, Break.RECEIPT_INVALID, "the event keeps no flattened JWS")
    try:
        return verify_statement(compact(jws), remotes, RECEIPT_TYP)
    except StatementInvalid as exc:
        if exc.reason == "untrusted_key":
            detail = "the receipt is not signed by a remote key given"
            raise BundleBroken(seq, Break.UNTRUSTED_KEY, detail) from None
        if exc.reason == ISSUER_MISMATCH:
            raise BundleBroken(seq, Break.RECEIPT_ISSUER_MISMATCH, f"the receipt {exc}") from None
        raise BundleBroken(seq, Break.RECEIPT_INVALID, f"the receipt {exc}") from None


def _bound(
    seq: int, record: Mapping[str, Any], claims: Mapping[str, Any], records: Records
) -> None:
    """6.3.3: the receipt states what the ledger recorded, checked in this order."""
    attempt: Any = claims.get("attempt")
    ours: Any = record["attempt"]
    task_id = claims.get("task_id")
    if not same_member(claims, "handoff_id", record, "handoff_id"):
        problem: str | None = "the receipt's handoff_id is not the event's"
    elif not (_is_int(attempt) and _is_int(ours) and 1 <= attempt <= ours):
        problem = "the receipt's attempt is not between 1 and the event's"
    elif not isinstance(task_id, str) or task_id != record["remote_task_id"]:
        problem = "the receipt's task_id is not the event's remote_task_id"
    else:
        problem = _token_problem(record, claims, records)
    if problem is None and not same_member(
        claims, "state", _final_state(record, records), "remote_state"
    ):
        problem = "the receipt's state is not the last state the ledger observed"
    if problem is not None:
        raise BundleBroken(seq, Break.RECEIPT_MISMATCH, problem)


def _token_problem(
    record: Mapping[str, Any], claims: Mapping[str, Any], records: Records
) -> str | None:
    """The token the receipt names is one the ledger minted for the handoff, with the
    ``req_digest`` it bound and the ``aud`` it was minted for (the receipt's ``iss``)."""
    recorded = (
        grant_recorded(r["event_type"], r["data"])
        for r in records.values()
        if r["handoff_id"] == record["handoff_id"]
    )
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


def same_member(one: Mapping[str, Any], name: str, other: Mapping[str, Any], as_: str) -> bool:
    """``one[name]`` equals ``other[as_]``; a member that is absent equals nothing, not
    even another absent member, and values are equal as JSON values (docs/audit-bundle.md,
    "equals")."""
    return name in one and as_ in other and strict_json.json_equal(one[name], other[as_])


def _final_state(record: Mapping[str, Any], records: Records) -> Mapping[str, Any]:
    """The data of the state the ledger last observed for the receipt's task ({} if none)."""
    observed = [
        seq
        for seq, r in records.items()
        if r["event_type"] == STATE_EVENT and _same_task(r, record)
    ]
    return records[max(observed)]["data"] if observed else {}


def _same_task(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    return (one["handoff_id"], one["remote_task_id"]) == (
        other["handoff_id"],
        other["remote_task_id"],
    )


def _artifacts_match(
    seq: int,
    record: Mapping[str, Any],
    claims: Mapping[str, Any],
    content: str | None,
    records: Records,
) -> None:
    """6.3.4: the exact artifacts carried hash to the receipt's digest (RFC 8785 form) and
    to the ``content_hash`` of the ledger's verdict on them: the event itself when a
    verdict carries the receipt, else the task's next ``artifact.*`` event."""
    if content is None:
        raise BundleBroken(seq, Break.ARTIFACT_MISSING, "the bundle carries no artifacts for it")
    try:
        value = strict_json.loads(content)
        listed = isinstance(value, list) and all(isinstance(a, dict) for a in value)
        digest = artifact_digest(value) if listed else None
    except (ValueError, TypeError):
        digest = None
    if digest is None or digest != claims.get("artifact_digest"):
        raise BundleBroken(seq, Break.ARTIFACT_MISMATCH, "not the artifacts the receipt signed")
    later = [
        s
        for s, r in records.items()
        if s >= seq and r["event_type"].startswith(VERDICT_PREFIX) and _same_task(r, record)
    ]
    expected = "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()
    if later and records[min(later)]["data"].get("content_hash") != expected:
        raise BundleBroken(seq, Break.ARTIFACT_MISMATCH, "not the artifacts the ledger received")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
