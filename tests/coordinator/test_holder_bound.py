"""Holder-bound tokens end to end (``FEDERATION_HOLDER_PROOF=1``): a ``delegate`` process
mints tokens naming its own key (``cnf.jkt``) and sends a fresh proof with every request,
so the run completes at a member that checks them; the same token presented by anyone
else, without a proof by that key, is refused ``holder_proof_missing``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from agent_cards.keys import SigningKey
from contracts.wire import GetTaskRequest
from coordinator.audit.log.events import transition_in
from coordinator.audit.receipts import grant_recorded
from coordinator.authority.delegator import DEFAULT_ISSUER, envelope_of, required_scopes
from coordinator.authority.holder import HOLDER_PROOF_ENV, hold
from coordinator.authority.identity import coordinator_keys
from coordinator.errors import FederationError
from coordinator.recovery.recover import restore_run
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.destinations import Destinations
from coordinator.remote.wire.transport import GRPC, Interface
from coordinator.service.cancel import run_delegator
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests import tokens
from tests.coordinator.test_cancel import live_task, start_delegate
from tests.coordinator.test_revoke import NO_POLL, federation
from tests.remote_risk.delegated import ISSUER, delegated_service
from tests.servers import free_port


def test_a_run_with_holder_bound_tokens_completes_and_a_stolen_one_is_useless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOLDER_PROOF_ENV, "1")
    with federation(tmp_path, monkeypatch, NO_POLL) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        stolen = bound_token(fed.data, run_id)
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {stolen}"}
        answer = httpx.post(fed.link.url + "/a2a/jsonrpc", json=body, headers=headers, timeout=10)
        (info,) = answer.json()["error"]["data"]
        assert (answer.status_code, info["metadata"]["reason"]) == (401, "holder_proof_missing")
        process.communicate(timeout=60)
        # every request of the run carried its proof: the task ran to the end and its
        # answer came back (held for review: no return contract was declared)
        assert fed.remote_state(task_id) == "TASK_STATE_COMPLETED"
        events = Workspace(DataDir(fed.data)).ledger().events(run_id)
        minted = [grant_recorded(e.event_type, e.data) for e in events]
        grants = [grant for grant in minted if grant is not None]
        kid = coordinator_keys(DataDir(fed.data)).signing_key().kid
        assert grants and all(grant["cnf_jkt"] == kid for grant in grants)
        moves = [transition_in(e.event_type, e.data) for e in events]
        returned = [move for move in moves if move and move["to"] == "RETURNED"]
        assert returned and returned[0]["reason"] == "remote_completed"


def bound_token(data: Path, run_id: str) -> str:
    """A token for the run's handoff bound to the coordinator's key, as the driver mints."""
    ws = Workspace(DataDir(data))
    store = ws.run_store()
    [record] = store.run_records(run_id)
    run = restore_run(ws, store, run_id, driver="", lease_seconds=0.0)
    agent = Registry(DataDir(data)).get(record.target)
    delegator = run_delegator(run, coordinator_keys(DataDir(data)), DEFAULT_ISSUER)
    scopes = required_scopes(agent.agent_card, record.skill)
    assert scopes is not None and record.budget is not None
    remaining = envelope_of(record.budget)
    minted = delegator.mint(
        record, agent.agent_id, scopes, remaining=remaining, message={}, holder_bound=True
    )
    assert minted.grant.cnf is not None
    return minted.token


def test_the_grpc_transport_proves_each_call_of_a_held_token() -> None:
    """Over gRPC the coordinator's transport sends the proof in metadata, naming the
    agent's public origin and the call's path: the member authenticates the call (the
    task is just unknown); the same token not held here goes without one and is refused."""
    holder_key = SigningKey.generate()
    port = free_port()
    with delegated_service(grpc_port=port) as (caller, _app):
        claims = tokens.delegation_claims(
            now=int(time.time()),
            issuer=ISSUER,
            audience=caller.audience,
            scope=caller.member.scope,
            handoff_id="h-held",
            jti="jti-held",
        )
        token = tokens.forge(tokens.header(), {**claims, "cnf": {"jkt": holder_key.kid}})
        headers = {"Authorization": f"Bearer {token}"}

        async def get_task() -> str:
            async with A2AClient() as client:
                remote = transport_for(
                    client,
                    Interface(f"127.0.0.1:{port}", GRPC),
                    Destinations(caller.base_url, (f"http://127.0.0.1:{port}",)),
                )
                try:
                    await remote.get_task(GetTaskRequest(id="no-such-task"), headers)
                except FederationError as exc:
                    return f"{exc.reason}: {exc}"
                return "answered"

        refused = asyncio.run(get_task())
        assert "holder_proof_missing" in refused
        hold(token, holder_key, claims["exp"])
        assert "holder_proof" not in asyncio.run(get_task())
        assert "not found" in asyncio.run(get_task()).lower()
