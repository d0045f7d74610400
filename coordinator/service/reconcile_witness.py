"""Each side of a reconcile witnesses the other: the remote's current log must extend
every head of it the coordinator kept from receipts, and the coordinator's ledger every
head of it the remote kept from tokens (RFC 9162 consistency)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_cards.jwk import thumbprint_of
from agent_cards.transparency.heads import Head, extends
from agent_cards.transparency.logged import verify_logged
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.trusted import TrustedKeys
from coordinator.audit import proofs
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.tree_heads import TreeHeadStore, verify_with_jwks
from coordinator.errors import LedgerError, UsageError
from coordinator.service.remote_audit import RemoteAudit


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
    """The remote's heads this coordinator kept from its receipts: those its pinned keys
    verified (by their thumbprints, whatever log a head names), each re-verified from the
    statement kept as its proof (a receipt stating its log, or an older tree head)."""
    return [
        _reverified(remote, head.jws)
        for head in TreeHeadStore(ledger.engine).witnessed(remote.signers)
    ]


def _reverified(remote: RemoteAudit, jws: str) -> Head:
    try:
        return verify_logged(jws, remote.keys)
    except StatementInvalid as exc:
        message = f"{remote.agent.name}'s kept head: {exc}"
        raise UsageError(message, "head_invalid") from None


def our_signers(jwks: Mapping[str, Any]) -> list[str]:
    """The thumbprints of our own keys: which of its kept heads a remote is asked for."""
    return sorted(thumbprint_of(key.public_key) for key in TrustedKeys.from_json(jwks))
