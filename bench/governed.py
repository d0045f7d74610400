"""One governed handoff through the coordinator, as ``federation delegate`` makes it.

The same steps as :meth:`coordinator.service.facade.CoordinatorService.delegate`: a run with
the operator's authority for the skill, admission, a narrowed token minted for the
handoff, dispatch, waiting for the remote task, return admission, the disposition and
the run document, with every fact in the audit ledger and every state in the run store.
Like ``federation serve coordinator``, the bench keeps one
:class:`~coordinator.remote.wire.client.A2AClient` (one connection pool) for all
handoffs; a one-shot ``federation delegate`` process opens its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from agent_cards.keys import KeySet, TrustedKeys
from bench.tokens import risk_payload
from contracts.returns import finding_contract
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.authority.delegator import DEFAULT_ISSUER, Delegator, RunAuthority, required_scopes
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.dispatch.delegate import Concluded
from coordinator.handoff.projection import record_ids
from coordinator.handoff.run import Run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace


async def register(client: A2AClient, ws: Workspace, url: str, name: str) -> RegisteredAgent:
    """Register the remote_risk at ``url`` under ``name``, its card keys pinned."""
    async with httpx.AsyncClient(trust_env=False) as http:
        jwks = (await http.get(url + "/.well-known/jwks.json")).json()
    anchor = TrustAnchor(keys=TrustedKeys.from_json(json.dumps(jwks)))
    registration = await Registry(ws.data).register(client, url, name, anchor=anchor)
    return registration.agent


def workspace(root: Path, database_url: str | None = None) -> Workspace:
    ws = Workspace(DataDir(root), database_url)
    ws.engine()
    return ws


async def handoff(
    client: A2AClient,
    agent: RegisteredAgent,
    keys: KeySet,
    ws: Workspace,
    *,
    run: Run | None = None,
    timeout: float = 30.0,
    payload: dict[str, Any] | None = None,
    save: bool = True,
) -> RemoteOutcome:
    payload = payload if payload is not None else risk_payload()
    run = run or new_run(agent, ws)
    expires_at = int(run.book.parent.expires_at.timestamp())
    delegator = Delegator(keys, run.authority, DEFAULT_ISSUER, run.run_id, expires_at, run.owner)
    wait = WaitPolicy(deadline_seconds=timeout)
    contract = finding_contract(record_ids(payload))
    return await run_remote_handoff(
        client,
        agent,
        propose(run, agent, RISK_SKILL, payload, wait, contract=contract),
        payload,
        run=run,
        wait=wait,
        delegator=delegator,
        # the disposition and the run document, with the outcome, as `delegate` does
        conclude=Concluded(run) if save else None,
    )


def new_run(agent: RegisteredAgent, ws: Workspace) -> Run:
    scopes = required_scopes(agent.agent_card, RISK_SKILL) or frozenset({"a2a:delegate"})
    authority = RunAuthority(principal="operator", tenant="default", scopes=scopes)
    return Run(
        owner="operator",
        authority=authority,
        trail=ws.trail(),
        store=ws.run_store(),
        kind="delegation",
    )
