"""What the coordinator signs to take grants back: pushes and status lists.

A revoked grant is named by its handoff: every token minted for that handoff (each
attempt's, and the cancel tokens) is revoked with it. Two signed documents tell the
members, both compact JWS by the coordinator's active key (header exactly ``alg``,
``kid``, ``typ``):

* the **push** (``typ`` ``revocation+jwt``), one per affected member, POSTed to its
  ``/revocations``: ``iss``, ``aud`` (the member's identity, the same ``aud`` its tokens
  name), ``iat``, ``exp`` (``iat`` + :data:`PUSH_LIFETIME_SECONDS`), a fresh ``jti``,
  ``run`` and ``handoffs`` (the revoked handoff ids);
* the **status list** (``typ`` ``statuslist+jwt``, IETF OAuth Token Status List), one
  per handoff at ``{base}/status-lists/{run}/{handoff}``: ``iss``, ``sub`` (that uri),
  ``iat``, ``exp``, ``ttl`` and ``status_list`` ``{bits: 1, lst}``; bit ``attempt - 1``
  is the status of that attempt's tokens (1: revoked). A token names its entry in
  ``status: {status_list: {idx, uri}}`` when the coordinator is told its public base
  (``FEDERATION_STATUS_URL``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from agent_cards.keys import SigningKey
from contracts.grant import Grant, with_status
from contracts.status_list import encode_status_list
from coordinator.authority.tokens import sign_jws
from coordinator.workspace import Workspace

REVOKED_EVENT = "grant.revoked"
STATUS_URL_ENV = "FEDERATION_STATUS_URL"
STATUS_LIST_PREFIX = "/status-lists"
PUSH_TYPE = "revocation+jwt"
STATUS_LIST_TYPE = "statuslist+jwt"
PUSH_LIFETIME_SECONDS = 120
STATUS_LIST_LIFETIME_SECONDS = 300
STATUS_LIST_TTL_SECONDS = 30
# Bits per handoff's list: one per attempt; an attempt beyond them carries no status.
STATUS_LIST_SIZE = 128


def status_base() -> str | None:
    """Where this coordinator's status lists are published (its public URL), if told."""
    base = os.environ.get(STATUS_URL_ENV, "").strip().rstrip("/")
    return base or None


def status_list_uri(base: str, run_id: str, handoff_id: str) -> str:
    segments = (quote(run_id, safe=""), quote(handoff_id, safe=""))
    return f"{base}{STATUS_LIST_PREFIX}/{segments[0]}/{segments[1]}"


def with_status_entry(grant: Grant, base: str | None, run_id: str, attempt: int) -> Grant:
    """``grant`` naming its handoff's status list and its attempt's bit, when there is
    a base to publish them under (and the attempt fits the list)."""
    if base is None or not 1 <= attempt <= STATUS_LIST_SIZE:
        return grant
    return with_status(grant, status_list_uri(base, run_id, grant.handoff.id), attempt - 1)


def push_token(
    key: SigningKey,
    issuer: str,
    audience: str,
    run_id: str,
    handoffs: Iterable[str],
    now: int,
) -> str:
    """The signed push telling the member ``audience`` that ``handoffs`` are revoked."""
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "iat": now,
        "exp": now + PUSH_LIFETIME_SECONDS,
        "jti": f"rev-{uuid.uuid4().hex}",
        "run": run_id,
        "handoffs": sorted(set(handoffs)),
    }
    return sign_jws(claims, key, PUSH_TYPE)


def status_list_token(
    key: SigningKey, issuer: str, uri: str, revoked: Iterable[int], now: int
) -> str:
    """The signed status list at ``uri`` with the bits at ``revoked`` set."""
    claims: Mapping[str, Any] = {
        "iss": issuer,
        "sub": uri,
        "iat": now,
        "exp": now + STATUS_LIST_LIFETIME_SECONDS,
        "ttl": STATUS_LIST_TTL_SECONDS,
        "status_list": encode_status_list(revoked, STATUS_LIST_SIZE),
    }
    return sign_jws(claims, key, STATUS_LIST_TYPE)


def revoked_handoffs(ws: Workspace, run_id: str) -> set[str]:
    """The run's handoffs revoked so far (hops included), from its ``grant.revoked``
    events: what the status lists and the token exchange go by."""
    revoked: set[str] = set()
    for event in ws.ledger().events(run_id):
        if event.event_type == REVOKED_EVENT:
            revoked.update(str(h) for h in event.data.get("handoffs", []))
    return revoked
