"""``federation revoke`` against a run driven by a ``delegate`` process, on loopback.

Three parties, each on its own: the coordinator's API (serving the status lists), a
remote_risk member built on the kit, reached through a link this test can cut, and the
``delegate`` process driving the run. Each test revokes the run while its remote task is
working and checks the member's own task store, the ledger and the run:

* with the push: the member cancels the task at once, every later call under the
  revoked grant is refused ``token_revoked``, nothing the run returns is admitted;
* with a member that ignores the push: its late artifact is not admitted;
* with the link cut during the revocation: the push fails (recorded), and the member
  learns it from the status list its token names, at its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from coordinator.audit.log.events import transition_in
from coordinator.audit.receipts import grant_recorded
from coordinator.authority.delegator import DEFAULT_ISSUER, envelope_of, required_scopes
from coordinator.authority.identity import coordinator_keys
from coordinator.authority.revocation import STATUS_URL_ENV
from coordinator.cli.main import main
from coordinator.recovery.recover import restore_run
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service.cancel import run_delegator
from coordinator.service.facade import CoordinatorService
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.coordinator.test_api import PAYLOAD, TOKEN
from tests.coordinator.test_cancel import ENV_NAMES, Slow, live_task, start_delegate
from tests.processes import Balancer, wait_for
from tests.servers import free_port, running

SKILL_DELAY_SECONDS = 4.0
NO_POLL = 3600.0
QUICK_POLL = 0.5
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


class Link(Balancer):
    """The network between the coordinator and the member: cut, it refuses new
    connections (a member unreachable, a push lost)."""

    cut = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        await super()._serve(reader, writer)


@dataclass
class Federation(Slow):
    api: str
    link: Link


def ignoring_pushes(app: FastAPI) -> ASGIApp:
    """The member, but its revocation endpoint answers 404 (a member that ignores them)."""

    async def wrapped(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/revocations":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return wrapped


@contextlib.contextmanager
def federation(
    root: Path, monkeypatch: pytest.MonkeyPatch, poll: float, wrap: Any = None
) -> Iterator[Federation]:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    data = DataDir(root / "data")
    keys = coordinator_keys(data)
    api_port, member_port = free_port(), free_port()
    monkeypatch.setenv(STATUS_URL_ENV, f"http://127.0.0.1:{api_port}")
    ws = Workspace(data)
    link = Link([member_port])
    with link:
        settings = Settings(
            public_base_url=link.url,
            skill_delay_seconds=SKILL_DELAY_SECONDS,
            trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
            revocation_poll_seconds=poll,
        )
        member = create_app(settings)
        api = create_api(ws, CoordinatorSettings(operator_token=TOKEN, worker_lease_seconds=5.0))
        served = wrap(member) if wrap else member
        with running(served, port=member_port), running(api, port=api_port) as api_url:
            anchor = TrustAnchor(keys=member.state.signing_keys.trusted_keys())
            asyncio.run(_register(data, link.url, anchor))
            input_file = root / "input.json"
            input_file.write_text(json.dumps(PAYLOAD))
            yield Federation(data.root, member, input_file, api_url, link)
    ws.close()


async def _register(data: DataDir, url: str, anchor: TrustAnchor) -> None:
    async with A2AClient() as client:
        await Registry(data).register(client, url, anchor=anchor)


def revoke(data: Path, target: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["--data-dir", str(data), "revoke", target, "--reason", "key leaked", "--json"])
    shown = capsys.readouterr().out
    assert code == 0, shown
    revocation: dict[str, Any] = json.loads(shown)
    return revocation


def handoff_token(data: Path, run_id: str) -> tuple[str, str]:
    """A fresh token for the run's handoff, as the coordinator mints one (the revoked
    grant's own shape: same handoff, principal, audience and scopes)."""
    ws = Workspace(DataDir(data))
    store = ws.run_store()
    [record] = store.run_records(run_id)
    run = restore_run(ws, store, run_id, driver="", lease_seconds=0.0)
    agent = Registry(DataDir(data)).get(record.target)
    delegator = run_delegator(run, coordinator_keys(DataDir(data)), DEFAULT_ISSUER)
    scopes = required_scopes(agent.agent_card, record.skill)
    assert scopes is not None and record.budget is not None
    remaining = envelope_of(record.budget)
    minted = delegator.mint(record, agent.agent_id, scopes, remaining=remaining, message={})
    return minted.token, record.handoff_id


def get_task(member_url: str, task_id: str, token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    return httpx.post(member_url + "/a2a/jsonrpc", json=body, headers=headers, timeout=10)


def assert_refused_revoked(fed: Federation, run_id: str, task_id: str) -> None:
    token, _ = handoff_token(fed.data, run_id)
    answer = get_task(fed.link.url, task_id, token)
    assert answer.status_code == 401, answer.text
    (info,) = answer.json()["error"]["data"]
    assert info["metadata"]["reason"] == "token_revoked"


def assert_nothing_admitted(fed: Federation, run_id: str) -> list[str]:
    """The branch CANCELLED (grant_revoked), nothing admitted; the ledger's event kinds."""
    ws = Workspace(DataDir(fed.data))
    [record] = ws.run_store().run_records(run_id)
    assert record.state.value == "CANCELLED"
    events = ws.ledger().events(run_id)
    kinds = [event.event_type for event in events]
    assert "artifact.admitted" not in kinds
    moves = [transition_in(e.event_type, e.data) for e in events]
    assert not any(move and move["to"] == "ACCEPTED" for move in moves)
    [revoked] = [e for e in events if e.event_type == "grant.revoked"]
    assert revoked.data["why"] == "key leaked" and revoked.data["handoffs"] == [record.handoff_id]
    return kinds


def assert_the_proof_bundle_holds_the_revocation(fed: Federation, run_id: str) -> None:
    """`audit prove`: the revocation is a proven event of the run, after every grant
    minted and before any later event, and the bundle verifies."""
    service = CoordinatorService(Workspace(DataDir(fed.data)))
    bundle = service.audit_prove(run_id)
    records = [json.loads(entry["canonical"]) for entry in bundle["events"]]
    kinds = [record["event_type"] for record in records]
    granted = [grant_recorded(r["event_type"], r["data"]) is not None for r in records]
    revoked_at = kinds.index("grant.revoked")
    assert any(granted[:revoked_at]) and not any(granted[revoked_at:])
    assert service.audit_verify(bundle).ok


def test_a_run_revoked_mid_task_is_cancelled_by_the_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with federation(tmp_path, monkeypatch, NO_POLL) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        revocation = revoke(fed.data, run_id, capsys)
        [pushed] = revocation["pushes"]
        assert pushed["outcome"] == "pushed" and pushed["cancelled"] == [task_id]
        # the member cancelled it on the push itself (it polls no status list here)
        assert fed.remote_state(task_id) == "TASK_STATE_CANCELED"
        assert_refused_revoked(fed, run_id, task_id)
        process.communicate(timeout=60)
        kinds = assert_nothing_admitted(fed, run_id)
        assert "revocation.pushed" in kinds
        assert_the_proof_bundle_holds_the_revocation(fed, run_id)


def test_a_late_artifact_under_a_revoked_grant_is_not_admitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member that ignores the push finishes its task; the coordinator admits nothing."""
    with federation(tmp_path, monkeypatch, NO_POLL, wrap=ignoring_pushes) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        [pushed] = revoke(fed.data, run_id, capsys)["pushes"]
        assert (pushed["outcome"], pushed["cause"]) == ("failed", "http_404")
        wait_for(lambda: fed.remote_state(task_id) == "TASK_STATE_COMPLETED", 30, "completion")
        process.communicate(timeout=60)
        kinds = assert_nothing_admitted(fed, run_id)
        assert "revocation.push_failed" in kinds


def test_a_member_unreachable_during_the_push_learns_it_from_the_status_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with federation(tmp_path, monkeypatch, QUICK_POLL) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        _, handoff_id = handoff_token(fed.data, run_id)
        listed = httpx.get(f"{fed.api}/status-lists/{run_id}/{handoff_id}", timeout=10)
        assert listed.status_code == 200  # public: no operator token
        assert listed.headers["content-type"].startswith("application/statuslist+jwt")
        fed.link.cut = True
        [pushed] = revoke(fed.data, run_id, capsys)["pushes"]
        assert pushed["outcome"] == "failed" and pushed["cause"].startswith("unreachable")
        # the member polls the coordinator's status list (its own path) and cancels
        wait_for(lambda: fed.remote_state(task_id) == "TASK_STATE_CANCELED", 30, "the poll")
        fed.link.cut = False
        assert_refused_revoked(fed, run_id, task_id)
        process.communicate(timeout=60)
        kinds = assert_nothing_admitted(fed, run_id)
        assert "revocation.push_failed" in kinds
        unknown = httpx.get(f"{fed.api}/status-lists/{run_id}/no-such-handoff", timeout=10)
        assert unknown.status_code == 404


def test_revoke_of_an_unknown_target_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    data = DataDir(tmp_path / "data")
    coordinator_keys(data)
    shown = io.StringIO()
    with contextlib.redirect_stderr(shown):
        code = main(["--data-dir", str(data.root), "revoke", "run-nope"])
    assert code != 0
    assert "unknown_run" in shown.getvalue() + capsys.readouterr().err


def test_revoking_one_handoff_revokes_its_grants_and_cancels_its_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with federation(tmp_path, monkeypatch, NO_POLL) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        _, handoff_id = handoff_token(fed.data, run_id)
        revocation = revoke(fed.data, handoff_id, capsys)
        assert (revocation["run_id"], revocation["handoffs"]) == (run_id, [handoff_id])
        [pushed] = revocation["pushes"]
        assert pushed["outcome"] == "pushed" and pushed["cancelled"] == [task_id]
        assert fed.remote_state(task_id) == "TASK_STATE_CANCELED"
        assert_refused_revoked(fed, run_id, task_id)
        process.communicate(timeout=60)
        assert_nothing_admitted(fed, run_id)
        [record] = Workspace(DataDir(fed.data)).run_store().run_records(run_id)
        assert record.reason == "grant_revoked"


def test_the_api_revokes_with_the_operator_token_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`POST /v1/revocations`: the operator's bearer token, a strict body; an unknown
    target is 404; the answer is the revocation, each member's push included."""
    with federation(tmp_path, monkeypatch, NO_POLL) as fed:
        process = start_delegate(fed)
        run_id, task_id = live_task(fed.data, process)
        url = f"{fed.api}/v1/revocations"
        body = {"target": run_id, "reason": "key leaked"}
        assert httpx.post(url, json=body, timeout=30).status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        unknown = httpx.post(url, json={"target": "run-nope"}, headers=headers, timeout=30)
        assert (unknown.status_code, unknown.json()["error"]["reason"]) == (404, "unknown_run")
        extra = httpx.post(url, json={**body, "more": 1}, headers=headers, timeout=30)
        assert extra.status_code == 422
        assert fed.remote_state(task_id) == "TASK_STATE_WORKING"  # nothing revoked so far
        answer = httpx.post(url, json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        [pushed] = answer.json()["pushes"]
        assert pushed["outcome"] == "pushed" and pushed["cancelled"] == [task_id]
        assert fed.remote_state(task_id) == "TASK_STATE_CANCELED"
        process.communicate(timeout=60)
        assert_nothing_admitted(fed, run_id)
