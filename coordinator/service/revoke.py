"""Revoking grants: ``federation revoke RUN|HANDOFF`` and ``POST /v1/revocations``.

Revoking a run revokes every handoff's grants in it; revoking a handoff, that handoff's
grants (each attempt's tokens, and every grant derived from them). In order:

1. the decision is a ledger event (``grant.revoked``: target, handoffs, who, why), which
   is also what the status lists are computed from;
2. the live branches under the revoked grants are committed CANCELLED in the store
   (reason ``grant_revoked``; a whole run is cancelled as ``federation cancel`` does), so
   the process driving them admits nothing they return afterwards;
3. each affected member is sent a signed push (:mod:`coordinator.authority.revocation`)
   to its ``/revocations``; it refuses the tokens from then on and cancels their tasks.
   Each outcome is a ledger event (``revocation.pushed`` with the tasks the member
   cancelled, or ``revocation.push_failed`` with the cause). A member the push does not
   reach learns it from the status list its tokens name, at its next poll.

``GET /status-lists/{run}/{handoff}`` (public, like the JWK Set) serves each handoff's
signed status list.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from fastapi import APIRouter
from fastapi.responses import Response
from sqlalchemy import select

from agent_cards import tls
from agent_cards.keys import KeySet
from contracts.handoff import HandoffRecord, HandoffState
from coordinator.authority import identity
from coordinator.authority.hops import derived_hops
from coordinator.authority.revocation import (
    REVOKED_EVENT,
    STATUS_LIST_PREFIX,
    STATUS_LIST_SIZE,
    push_token,
    revoked_handoffs,
    status_base,
    status_list_token,
    status_list_uri,
)
from coordinator.errors import FederationError, RegistryError
from coordinator.handoff.run import Run
from coordinator.recovery.recover import restore_run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.destinations import check_destination
from coordinator.service.cancel import registered, run_document
from coordinator.storage.runs import RunStore
from coordinator.storage.schema import handoffs as handoff_rows
from coordinator.workspace import Workspace

S = HandoffState
REVOCATION_PATH = "/revocations"
PUSH_TIMEOUT_SECONDS = 2.0
STATUS_LIST_MEDIA_TYPE = "application/statuslist+jwt"


async def revoke(
    ws: Workspace,
    keys: KeySet,
    issuer: str,
    target: str,
    *,
    by: str,
    why: str,
    client: httpx.AsyncClient | None = None,
) -> dict[str, Any]:
    """Revoke ``target`` (a run id or a handoff id); what was revoked and each push."""
    store = ws.run_store()
    run_id, handoffs = resolve(store, target)
    hops = derived_hops(ws, run_id, handoffs)  # the children exchanged from them, any depth
    handoffs |= set(hops)
    run = restore_run(ws, store, run_id, driver="", lease_seconds=0.0)
    run.book.driver = None  # revoking takes no lease: the driver keeps its own
    run.emit(REVOKED_EVENT, None, target=target, handoffs=sorted(handoffs), by=by, why=why)
    records = [r for r in run.book.records.values() if r.handoff_id in handoffs]
    _commit_cancelled(run, records, whole_run=target == run_id, by=by, why=why)
    run_document(ws, run)  # decided and committed before any member is told
    by_agent: dict[str, set[str]] = {}
    for handoff_id, agent in [*((r.handoff_id, r.target) for r in records), *hops.items()]:
        by_agent.setdefault(agent, set()).add(handoff_id)
    agents = registered(Registry(ws.data), set(by_agent))
    pushes = await _push_all(run, keys, issuer, agents, by_agent, client)
    document = run_document(ws, run)
    return {
        "run_id": run_id,
        "target": target,
        "handoffs": sorted(handoffs),
        "pushes": pushes,
        "state": document.get("state"),
    }


def resolve(store: RunStore, target: str) -> tuple[str, set[str]]:
    """The run and the handoffs ``target`` names: a run (all its handoffs) or a handoff."""
    if store.run(target) is not None:
        return target, {r.handoff_id for r in store.run_records(target)}
    store.flush()
    query = select(handoff_rows.c.run_id).where(handoff_rows.c.handoff_id == target).limit(1)
    with store.engine.connect() as connection:
        row = connection.execute(query).first()
    if row is None:
        raise FederationError(f"no run or handoff {target} in the database", "unknown_run")
    return str(row.run_id), {target}


def _commit_cancelled(
    run: Run, records: list[HandoffRecord], *, whole_run: bool, by: str, why: str
) -> None:
    if whole_run:
        live = any(r.live or r.state is S.RETURNED for r in records)
        for record in run.book.cancel("grant_revoked", by=by, why=why) if live else []:
            run.record(record)
        return
    for record in records:
        if record.live or record.state is S.RETURNED:
            run.record(run.book.commit(record, S.CANCELLED, "grant_revoked"))


async def _push_all(
    run: Run,
    keys: KeySet,
    issuer: str,
    agents: dict[str, RegisteredAgent],
    by_agent: dict[str, set[str]],
    client: httpx.AsyncClient | None,
) -> list[dict[str, Any]]:
    async with _client(client) as http:
        outcomes = await asyncio.gather(
            *(
                _push(http, keys, issuer, run.run_id, name, agents.get(name), handoffs)
                for name, handoffs in sorted(by_agent.items())
            )
        )
    for outcome in outcomes:
        kind = "revocation.pushed" if outcome["outcome"] == "pushed" else "revocation.push_failed"
        run.emit(kind, None, **outcome)
    return list(outcomes)


async def _push(
    http: httpx.AsyncClient,
    keys: KeySet,
    issuer: str,
    run_id: str,
    name: str,
    agent: RegisteredAgent | None,
    handoffs: set[str],
) -> dict[str, Any]:
    outcome: dict[str, Any] = {"agent": name, "handoffs": sorted(handoffs)}
    if agent is None:
        return outcome | {"outcome": "failed", "cause": "unknown_agent"}
    url = revocation_url(agent)
    try:  # the one destination rule every request for an agent obeys
        check_destination(url, agent.destinations)
    except RegistryError as exc:
        return outcome | {"outcome": "failed", "cause": exc.reason}
    token = push_token(keys.signing_key(), issuer, agent.agent_id, run_id, handoffs, _now())
    try:
        answer = await http.post(
            url,
            content=token,
            headers={"Content-Type": "application/jwt"},
            timeout=PUSH_TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        return outcome | {"outcome": "failed", "cause": f"unreachable: {type(exc).__name__}"}
    if answer.status_code != 200:
        return outcome | {"outcome": "failed", "cause": f"http_{answer.status_code}"}
    cancelled = _cancelled_of(answer)
    return outcome | {"outcome": "pushed", "cancelled": cancelled}


def _cancelled_of(answer: httpx.Response) -> list[str]:
    try:
        body = answer.json()
        cancelled = body.get("cancelled", []) if isinstance(body, dict) else []
    except ValueError:
        return []
    return [str(task) for task in cancelled if isinstance(task, str)][:1000]


def revocation_url(agent: RegisteredAgent) -> str:
    """The member's revocation endpoint: beside its JSON-RPC interface, at its base."""
    interface = agent.agent_card.jsonrpc_interface()
    if interface is not None:
        base = interface.url.rstrip("/").removesuffix("/a2a/jsonrpc")
    else:
        base = agent.card_url.removesuffix("/.well-known/agent-card.json")
    return base + REVOCATION_PATH


class _client:
    """The given client, or one of our own for this revocation."""

    def __init__(self, given: httpx.AsyncClient | None) -> None:
        self._given = given
        self._own: httpx.AsyncClient | None = None

    async def __aenter__(self) -> httpx.AsyncClient:
        if self._given is not None:
            return self._given
        self._own = httpx.AsyncClient(
            follow_redirects=False, trust_env=False, verify=tls.verified()
        )
        return self._own

    async def __aexit__(self, *exc: object) -> None:
        if self._own is not None:
            await self._own.aclose()


def _now() -> int:
    return int(time.time())


# --- the status lists -------------------------------------------------------------------------


def status_list_router(ws: Workspace) -> APIRouter:
    router = APIRouter(tags=["public"])

    @router.get(
        STATUS_LIST_PREFIX + "/{run_id}/{handoff_id}",
        response_class=Response,
        responses={
            200: {"content": {STATUS_LIST_MEDIA_TYPE: {}}, "description": "the signed list"},
            404: {"description": "no such handoff, or no status lists are published"},
        },
    )
    def status_list(run_id: str, handoff_id: str) -> Response:
        """The handoff's signed status list (IETF OAuth Token Status List): bit
        ``attempt - 1`` is 1 once the handoff's grants are revoked."""
        base = status_base()
        if base is None or not _is_handoff(ws, run_id, handoff_id):
            raise FederationError(f"no status list for {run_id}/{handoff_id}", "unknown_run")
        revoked = handoff_id in revoked_handoffs(ws, run_id)
        keys = identity.coordinator_keys(ws.data)
        uri = status_list_uri(base, run_id, handoff_id)
        bits = range(STATUS_LIST_SIZE) if revoked else ()
        token = status_list_token(keys.signing_key(), identity.issuer_id(), uri, bits, _now())
        headers = {"Cache-Control": "no-store"}
        return Response(token, media_type=STATUS_LIST_MEDIA_TYPE, headers=headers)

    return router


def _is_handoff(ws: Workspace, run_id: str, handoff_id: str) -> bool:
    """Whether ``handoff_id`` is one of the run's: a handoff, or a hop exchanged in it."""
    records = ws.run_store().run_records(run_id)
    if any(r.handoff_id == handoff_id for r in records):
        return True
    return handoff_id in derived_hops(ws, run_id, {r.handoff_id for r in records})
