"""Leases and cancellation against a real, slow remote_risk, and the operator's view of it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cards.keys import KeySet, SigningKey, save_key_set
from contracts.handoff import HandoffState
from contracts.returns import finding_contract
from contracts.wire import GetTaskRequest
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.authority.delegator import DEFAULT_ISSUER, Delegator
from coordinator.cli.main import main
from coordinator.dispatch.attempt.driver import RemoteOutcome, WaitPolicy, propose
from coordinator.dispatch.attempts import cancel_branches
from coordinator.dispatch.attempts import run_remote_handoff as dispatch
from coordinator.handoff.run import Run
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.processes import PAYLOAD
from tests.runs import new_run
from tests.servers import free_port, running

COORDINATOR_KEYS = KeySet(active=SigningKey.generate())
REMOTE_KEYS = KeySet(active=SigningKey.generate())


@pytest.fixture
def slow_risk() -> Iterator[str]:
    """remote_risk whose skill takes 3 s, trusting the test coordinator."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        skill_delay_seconds=3.0,
        trusted_issuers={DEFAULT_ISSUER: COORDINATOR_KEYS.trusted_keys()},
        signing_keys=REMOTE_KEYS,
    )
    with running(create_app(settings), port=port) as url:
        yield url


async def registered(client: A2AClient, url: str, data: DataDir) -> RegisteredAgent:
    anchor = TrustAnchor(keys=REMOTE_KEYS.trusted_keys())
    return (await Registry(data).register(client, url, anchor=anchor)).agent


def delegator_for(run: Run) -> Delegator:
    expires = int(run.book.parent.expires_at.timestamp())
    return Delegator(
        COORDINATOR_KEYS, run.authority, DEFAULT_ISSUER, run.run_id, expires, run.owner
    )


async def one_handoff(
    client: A2AClient,
    agent: RegisteredAgent,
    run: Run,
    deadline: float,
    sent: set[str] | None = None,
) -> RemoteOutcome:
    wait = WaitPolicy(deadline_seconds=deadline, first_poll=0.05, max_poll=0.2)
    return await dispatch(
        client,
        agent,
        propose(
            run,
            agent,
            RISK_SKILL,
            PAYLOAD,
            wait,
            contract=finding_contract(sent or {"brief-001", "risk-policy-007"}),
        ),
        PAYLOAD,
        run=run,
        wait=wait,
        delegator=delegator_for(run),
    )


def test_lease_expiry_times_out_and_cancels_the_remote_task(slow_risk: str, tmp_path: Path) -> None:
    """A handoff whose lease ends before the slow remote finishes is TIMED_OUT and cancelled."""

    async def go() -> tuple[RemoteOutcome, str]:
        async with A2AClient() as client:
            agent = await registered(client, slow_risk, DataDir(tmp_path))
            run = new_run(owner="coordinator")
            outcome = await one_handoff(client, agent, run, deadline=0.5)
            headers = run.credentials[outcome.record.attempt_id]
            task_id = outcome.record.remote_task_id or ""
            task = await client.get_task(agent.endpoint, GetTaskRequest(id=task_id), headers)
            return outcome, task.status.state.value

    outcome, remote_state = asyncio.run(go())
    assert outcome.record.state is HandoffState.TIMED_OUT
    assert outcome.record.reason == "lease_expired"
    assert remote_state == "TASK_STATE_CANCELED"


def test_cancelling_the_run_reaches_the_live_remote_task(slow_risk: str, tmp_path: Path) -> None:
    """Cancelling a run commits CANCELLED, stops new dispatch and cancels the remote task."""

    async def go() -> tuple[Run, RemoteOutcome, str]:
        async with A2AClient() as client:
            agent = await registered(client, slow_risk, DataDir(tmp_path))
            run = new_run(owner="coordinator")
            work = asyncio.ensure_future(one_handoff(client, agent, run, deadline=10))
            while not run.book.records or not next(iter(run.book.records.values())).remote_task_id:
                await asyncio.sleep(0.05)
            await cancel_branches(client, run, {agent.name: agent})
            outcome = await work
            headers = run.credentials[outcome.record.attempt_id]
            task_id = outcome.record.remote_task_id or ""
            task = await client.get_task(agent.endpoint, GetTaskRequest(id=task_id), headers)
            late = await one_handoff(client, agent, run, deadline=1)
            assert late.record.state is HandoffState.PROPOSED
            return run, outcome, task.status.state.value

    run, outcome, remote_state = asyncio.run(go())
    assert outcome.record.state is HandoffState.CANCELLED
    assert remote_state == "TASK_STATE_CANCELED"
    assert run.book.units[-1].reason == "run_cancelled"


def test_run_show_answers_the_operator(
    slow_risk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run show` reports a rejected artifact, a timeout and a cancel from the run record."""
    data = DataDir(tmp_path)

    async def go() -> Run:
        async with A2AClient() as client:
            agent = await registered(client, slow_risk, data)
            run = new_run(owner="coordinator")
            # The coordinator only sent the policy, so a finding citing the brief is refused.
            await one_handoff(client, agent, run, deadline=10, sent={"risk-policy-007"})
            await one_handoff(client, agent, run, deadline=0.3)
            live = asyncio.ensure_future(one_handoff(client, agent, run, deadline=10))
            while (
                len(run.book.records) < 3 or not list(run.book.records.values())[2].remote_task_id
            ):
                await asyncio.sleep(0.05)
            await cancel_branches(client, run, {agent.name: agent})
            await live
            return run

    run = asyncio.run(go())
    store = Workspace(data).run_store()
    store.save_run(run.run_id, run.owner, run.kind, {}, run.document())
    assert main(["--data-dir", str(tmp_path), "run", "show", run.run_id]) == 0
    text = capsys.readouterr().out
    assert main(["--data-dir", str(tmp_path), "run", "show", run.run_id, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)

    states = sorted(branch["state"] for branch in document["branches"])
    assert states == ["CANCELLED", "REJECTED", "TIMED_OUT"]
    assert document["owner"] == "coordinator" and document["cancelled"] is True
    assert document["live_branches"] == []
    assert all(branch["lease_expires_at"] for branch in document["branches"])
    assert all(branch["state_version_seen"] == 0 for branch in document["branches"])
    [artifact] = document["artifacts"]
    assert artifact["decision"] == "rejected"
    assert artifact["reason"] == "unknown_evidence: brief-001"
    assert artifact["content_hash"].startswith("sha256:") and artifact["size"] > 0
    kinds = {entry["kind"] for entry in document["budget"]["ledger"]}
    assert kinds == {"reserved", "consumed", "released"}
    for word in ("TIMED_OUT", "CANCELLED", "REJECTED", "unknown_evidence", "pending: nothing"):
        assert word in text


def test_delegate_cancel_after_from_the_command_line(
    slow_risk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`delegate --cancel-after` cancels the live handoff and reports it CANCELLED."""
    data = DataDir(tmp_path)

    async def register() -> None:
        async with A2AClient() as client:
            await registered(client, slow_risk, data)

    asyncio.run(register())
    # The coordinator's own keys must be the ones remote_risk trusts for this test.
    save_key_set(COORDINATOR_KEYS, tmp_path / "keys")
    input_file = tmp_path / "input.json"
    input_file.write_text(json.dumps(PAYLOAD))
    code = main(
        [
            "--data-dir",
            str(tmp_path),
            "delegate",
            "--to",
            "remote-risk",
            "--skill",
            RISK_SKILL,
            "--input",
            str(input_file),
            "--cancel-after",
            "0.5",
            "--json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 1
    assert document["local_state"] == "CANCELLED" and document["cancelled"] is True
    assert document["remote_state"] == "TASK_STATE_CANCELED"
