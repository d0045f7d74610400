"""A key rotation at remote_risk loses no delegation and needs no operator action.

Real processes: remote_risk (its key set in its data directory) and the coordinator's
CLI. remote_risk is stopped, its key rotated (the new key active, the old one in its
grace) and started again; the coordinator, still pinning only the old key, delegates:

* the first delegation's token names the old key's identity, so remote_risk signs its
  receipt with the old key (ACCEPTED, where before it was REJECTED ``receipt_invalid``),
  and the receipt carries the old key's statement vouching for the new key, which the
  coordinator adopts (``agent.key_succeeded``);
* the next delegation's token names the new key, and its receipt verifies with it;
* registering the agent again needs no anchor: its card, now signed by the new key,
  verifies with the keys the coordinator adopted.

A new key no pinned key vouches for, offered with ``--expect-kid``, is held for approval
as docs/trust.md says, not adopted.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, load_key_set, load_or_create, save_key_set
from coordinator.assessment.pilot import RISK_SKILL
from coordinator.audit.receipts import grant_recorded
from coordinator.authority.delegator import Delegator, RunAuthority
from coordinator.authority.identity import coordinator_keys, issuer_id
from coordinator.dispatch.attempt.driver import WaitPolicy, propose
from coordinator.dispatch.attempts import run_remote_handoff
from coordinator.handoff.run import start_run
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, registered


@pytest.fixture
def federation_on_disk(tmp_path: Path) -> Iterator[tuple[DataDir, RemoteRiskProcess]]:
    with registered(tmp_path) as (data, risk):
        yield data, risk


def delegate(data: DataDir, tmp_path: Path) -> dict[str, Any]:
    payload = tmp_path / "input.json"
    payload.write_text(json.dumps(PAYLOAD))
    args = ["delegate", "--to", "remote-risk", "--skill", RISK_SKILL, "--input", str(payload)]
    process = federation(data.root, *args, "--json")
    out, err = process.communicate(timeout=120)
    assert out, err
    document: dict[str, Any] = json.loads(out)
    return document


def rotate(risk: RemoteRiskProcess) -> tuple[str, str]:
    """Stop remote_risk, rotate its key (the old one verifying for an hour), start it:
    (old kid, new kid)."""
    risk.stop()
    keys = load_key_set(risk.data_dir / "keys")
    rotated = keys.rotate(grace=timedelta(hours=1))
    risk.start()
    return keys.active.kid, rotated.active.kid


def events(data: DataDir, event_type: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The ``data`` of the ledger's events of ``event_type`` (of ``run_id``, if given)."""
    with sqlite3.connect(data.path("federation.db")) as connection:
        rows = connection.execute(
            "SELECT canonical, run_id FROM audit_events WHERE event_type = ?", (event_type,)
        ).fetchall()
    return [json.loads(row[0])["data"] for row in rows if run_id in (None, row[1])]


def grants(data: DataDir, run_id: str | None = None) -> list[dict[str, Any]]:
    """The grants the ledger records (of ``run_id``, if given), in order, in either form
    (:func:`~coordinator.audit.receipts.grant_recorded`)."""
    with sqlite3.connect(data.path("federation.db")) as connection:
        rows = connection.execute("SELECT canonical, run_id FROM audit_events ORDER BY seq")
        records = [json.loads(row[0]) for row in rows if run_id in (None, row[1])]
    recorded = [grant_recorded(r["event_type"], r["data"]) for r in records]
    return [dict(grant) for grant in recorded if grant is not None]


def test_a_remote_rotation_loses_no_delegation_and_needs_no_operator(
    federation_on_disk: tuple[DataDir, RemoteRiskProcess], tmp_path: Path
) -> None:
    data, risk = federation_on_disk
    assert delegate(data, tmp_path)["local_state"] == "ACCEPTED"
    old, new = rotate(risk)

    first = delegate(data, tmp_path)
    assert first["local_state"] == "ACCEPTED", first
    (succeeded,) = events(data, "agent.key_succeeded")
    assert (succeeded["from_kid"], succeeded["kid"]) == (old, new)
    agent = Registry(data).get("remote-risk")
    assert agent.verified_kid == new and len(agent.successions) == 1
    assert {key["kid"] for key in agent.pinned_jwks["keys"]} == {old, new}

    second = delegate(data, tmp_path)
    assert second["local_state"] == "ACCEPTED", second
    (grant,) = grants(data, second["run_id"])
    active = load_key_set(risk.data_dir / "keys").active
    assert active.kid == new and grant["aud"] == identity_of(active.verification_key())

    again = federation(data.root, "register", risk.base_url, "--json")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, (out, err)
    assert events(data, "agent.key_succeeded") == [succeeded]


def test_a_new_key_nobody_vouches_for_is_held_not_adopted(
    federation_on_disk: tuple[DataDir, RemoteRiskProcess], tmp_path: Path
) -> None:
    """remote_risk redeployed with a fresh key set (no statement by the pinned key):
    registering again with ``--expect-kid`` of the new key is held (exit 1), and
    delegations keep the old pins until the operator approves."""
    data, risk = federation_on_disk
    before = Registry(data).get("remote-risk")
    risk.stop()
    for path in (risk.data_dir / "keys").iterdir():
        path.unlink()
    risk.keys = load_or_create(risk.data_dir / "keys")
    risk.start()
    fresh = risk.keys.active.kid
    again = federation(data.root, "register", risk.base_url, f"--expect-kid={fresh}", "--json")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 1, (out, err)
    held = Registry(data).get("remote-risk")
    assert held.verified_kid == before.verified_kid and held.pinned_jwks == before.pinned_jwks
    assert held.pending_kid == fresh
    approved = federation(data.root, "register", risk.base_url, "--approve", "--json")
    out, err = approved.communicate(timeout=60)
    assert approved.returncode == 0, (out, err)
    assert Registry(data).get("remote-risk").verified_kid == fresh


# --- a scheduled rotation in a running remote_risk, with delegations in flight --------------

SWITCH_SECONDS = 6.0


async def _one_delegation(ws: Workspace, client: A2AClient, data: DataDir) -> str:
    """One handoff to remote-risk, driven here, as the registry stands when it starts."""
    authority = RunAuthority(scopes=frozenset({"risk:interpret"}))
    run = start_run(ws, "operator", authority=authority, kind="delegation")
    expires = int(run.book.parent.expires_at.timestamp())
    keys = coordinator_keys(data)
    delegator = Delegator(keys, authority, issuer_id(), run.run_id, expires, run.owner)
    wait = WaitPolicy(deadline_seconds=30)
    agent = Registry(data).get("remote-risk")
    proposal = propose(run, agent, RISK_SKILL, PAYLOAD, wait)
    outcome = await run_remote_handoff(
        client, agent, proposal, PAYLOAD, run=run, wait=wait, delegator=delegator
    )
    run.trail.flush()
    return f"{outcome.record.state.value} {outcome.record.reason or ''}".strip()


async def _traffic_until(data: DataDir, until: float, in_flight: int) -> list[str]:
    ws = Workspace(data)
    ends: list[str] = []
    try:
        async with A2AClient() as client:
            while time.monotonic() < until:
                batch = [_one_delegation(ws, client, data) for _ in range(in_flight)]
                ends += await asyncio.gather(*batch)
    finally:
        ws.close()
    return ends


def test_a_scheduled_rotation_mid_traffic_loses_no_delegation(tmp_path: Path) -> None:
    """remote_risk starts with a key published to become active a few seconds later, and
    the coordinator pins only the active one. Delegations run three at a time across the
    switch: every one is ACCEPTED; the coordinator adopts the announced key once, from a
    receipt, before the switch; tokens minted after that name it."""
    data = DataDir(tmp_path / "coordinator")
    coordinator_keys(data)
    remote_keys = load_or_create(tmp_path / "remote" / "keys")
    old = remote_keys.active
    announced = remote_keys.publish(grace=timedelta(hours=1), delay=timedelta(seconds=30))
    risk = RemoteRiskProcess(tmp_path / "remote", data.path("jwks.json"))
    assert risk.keys.published is not None
    new = risk.keys.published.key
    assert announced.published is not None and announced.published.key.kid == new.kid
    # the switch is scheduled from now, so that traffic surely spans it
    switch_at = datetime.now(UTC) + timedelta(seconds=SWITCH_SECONDS)
    rescheduled = replace(announced, published=replace(announced.published, activates_at=switch_at))
    save_key_set(rescheduled, tmp_path / "remote" / "keys")
    risk.keys = load_or_create(tmp_path / "remote" / "keys")
    risk.start()
    try:
        risk.keys = KeySet(active=old)  # the operator pins only the key active now
        risk.register_with(data)
        until = time.monotonic() + SWITCH_SECONDS + 4
        ends = asyncio.run(_traffic_until(data, until, in_flight=3))
    finally:
        risk.stop()
    assert ends and set(ends) == {"ACCEPTED finding_admitted"}, ends
    (succeeded,) = events(data, "agent.key_succeeded")
    assert (succeeded["from_kid"], succeeded["kid"]) == (old.kid, new.kid)
    auds = [grant["aud"] for grant in grants(data)]
    assert auds[0] == identity_of(old.verification_key())
    assert auds[-1] == identity_of(new.verification_key())
    assert datetime.now(UTC) > switch_at
