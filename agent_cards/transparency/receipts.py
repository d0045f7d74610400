"""The receipts extension: with every terminal task, the remote's signed statement of it.

An agent that declares :data:`RECEIPTS_EXTENSION_URI` in its card's
``capabilities.extensions`` puts, in every terminal task it returns, under
``task.metadata[RECEIPTS_EXTENSION_URI]``, ``{"receipt": "<compact JWS>"}`` (and, in the
final ``statusUpdate`` event of a stream, the same in the event's ``metadata``). The
receipt is a signed statement (:mod:`agent_cards.transparency.statements`) with the
agent's card key, ``typ`` :data:`RECEIPT_TYP`, claims:

``iss``
    the agent's identity: the RFC 9278 thumbprint URI of the key that signs the receipt
    (:mod:`agent_cards.identity`, the tokens' ``aud``), never a URL;
``task_id``, ``handoff_id``, ``attempt``
    the task and the handoff binding it was opened under;
``jti``, ``req_digest``
    the delegation token's ``jti`` and ``req_digest`` (null if it bound none);
``artifact_digest``
    :func:`artifact_digest` of the exact ``task.artifacts`` returned;
``state``
    the final ``TaskState``;
``issued_at``
    the task's status timestamp;
``log_tree_size``, ``log_root_hash``
    optional: the agent's decision log once the receipt's entry was appended (its size
    and RFC 9162 root, :mod:`agent_cards.transparency.logged`), so one signature states
    both the task and the log;
``log_head``
    optional, the older form of the two above: a signed tree head of that log.

docs/receipts-extension.md specifies it for other implementations.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_cards.keys import SigningKey
from agent_cards.transparency.statements import (
    ISSUER_MISMATCH,
    StatementInvalid,
    sign_statement,
    verify_statement,
)
from agent_cards.trusted import TrustedKeys
from contracts.canonical import canonical_json

RECEIPTS_EXTENSION_URI = "https://a2a-federation.dev/extensions/receipts/v1"
RECEIPT_TYP = "a2a-receipt+jwt"
RECEIPT_KEY = "receipt"
# Under the extension's key in an artifact's metadata: the receipts of the hops the agent
# delegated to with a child token while doing the task (docs/receipts-extension.md).
HOPS_KEY = "hops"
# What a receipt must state and the coordinator compares with what it knows.
COMPARED = ("task_id", "handoff_id", "attempt", "jti", "req_digest", "artifact_digest", "state")


def artifact_digest(artifacts: Sequence[Mapping[str, Any]] | None) -> str:
    """``sha-256:`` + base64url of SHA-256 over the RFC 8785 form of the artifacts array
    (wire JSON; none returned counts as ``[]``)."""
    digest = hashlib.sha256(canonical_json([dict(a) for a in artifacts or []])).digest()
    return "sha-256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Bound:
    """What the task was opened under: its handoff binding and its token's identifiers."""

    handoff_id: str | None
    attempt: Any
    jti: str | None
    req_digest: str | None


def receipt_claims(task: Mapping[str, Any], bound: Bound, issuer: str) -> dict[str, Any]:
    """The claims of the receipt for ``task`` (wire JSON of a terminal task)."""
    status = task.get("status") or {}
    return {
        "iss": issuer,
        "task_id": task.get("id"),
        "handoff_id": bound.handoff_id,
        "attempt": bound.attempt,
        "jti": bound.jti,
        "req_digest": bound.req_digest,
        "artifact_digest": artifact_digest(task.get("artifacts")),
        "state": status.get("state"),
        "issued_at": status.get("timestamp"),
    }


def issue_receipt(claims: Mapping[str, Any], key: SigningKey) -> str:
    return sign_statement(claims, key, RECEIPT_TYP)


def verified_receipt(receipt: Any, keys: TrustedKeys) -> dict[str, Any]:
    """The claims of ``receipt`` if one of ``keys`` signed it in its own name; else
    ``receipt_issuer_mismatch`` (its ``iss`` is not the verifying key's identity) or
    ``receipt_invalid`` (any other reason of :func:`verify_statement`)."""
    try:
        return verify_statement(receipt, keys, RECEIPT_TYP)
    except StatementInvalid as exc:
        reason = "receipt_issuer_mismatch" if exc.reason == ISSUER_MISMATCH else "receipt_invalid"
        raise StatementInvalid(reason, f"the receipt {exc}") from None


def receipt_of(metadata: Mapping[str, Any] | None) -> Any:
    """The receipt a task's (or a status event's) metadata carries, or None."""
    extension = (metadata or {}).get(RECEIPTS_EXTENSION_URI)
    return extension.get(RECEIPT_KEY) if isinstance(extension, Mapping) else None


def relayed_receipts(artifacts: Sequence[Any] | None) -> list[Any]:
    """The hop receipts an agent's artifacts carry (``metadata[URI].hops`` of each, in
    order), as found: the caller checks each one, and that each is a string."""
    found: list[Any] = []
    for artifact in artifacts or []:
        metadata = artifact.get("metadata") if isinstance(artifact, Mapping) else None
        extension = (metadata or {}).get(RECEIPTS_EXTENSION_URI)
        hops = extension.get(HOPS_KEY) if isinstance(extension, Mapping) else None
        if hops is not None:
            found.extend(hops if isinstance(hops, list) else [hops])
    return found


def check_receipt(
    receipt: Any, keys: TrustedKeys, task: Mapping[str, Any], expected: Mapping[str, Any]
) -> dict[str, Any]:
    """The receipt's claims, once it verifies with ``keys`` and states exactly the task
    returned (its id, artifacts and state) and ``expected`` (handoff, attempt, jti,
    req_digest); else :class:`StatementInvalid` with ``receipt_missing``,
    ``receipt_invalid``, ``receipt_issuer_mismatch`` (its ``iss`` is not the identity of
    the key that verified it) or ``receipt_mismatch``."""
    if receipt is None:
        raise StatementInvalid("receipt_missing", "the agent declares receipts; none came")
    claims = verified_receipt(receipt, keys)
    status = task.get("status") or {}
    actual = {
        "task_id": task.get("id"),
        "artifact_digest": artifact_digest(task.get("artifacts")),
        "state": status.get("state"),
        **expected,
    }
    for name in COMPARED:
        if name in actual and claims.get(name) != actual[name]:
            raise StatementInvalid(
                "receipt_mismatch", f"the receipt's {name} is not that of the task returned"
            )
    return claims
