"""A coordinator rotation that activates at once, mid-traffic, after a stranger spent the
remote's key refresh, loses no delegation and needs no operator action (issue 31, 6).

Real processes: ``federation serve coordinator`` (its API takes the delegations and
serves the JWK Set), remote_risk trusting that JWK Set by URL with a refresh interval of
a few seconds, and ``federation keys rotate --publish-seconds 0`` run meanwhile. Just
before the rotation a stranger sends a token naming a fresh kid under the coordinator's
issuer: remote_risk fetches the set for it, which spends its refresh for the interval, so
the first delegations under the new key are refused ``kid_unknown``. The remote says when
to come back (``Retry-After``, by which time it has fetched the set again whoever asks);
the coordinator tries such a handoff once more after that wait, and every delegation ends
ACCEPTED. The ledger shows the retry of each refused one, with its cause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.keys import SigningKey
from contracts.grant import Grant
from coordinator.audit.ledger import Ledger
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.authority.tokens import mint_token
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.server.app import JSONRPC_PATH
from member_kit.trust.refresh import MIN_REFRESH_ENV_VAR
from tests import tokens
from tests.coordinator.served import TOKEN, served
from tests.processes import PAYLOAD, RemoteRiskProcess, federation, wait_for

# Long enough that the rotation surely lands inside the window the stranger opened.
REFRESH_SECONDS = 8
WORKERS = 3


@pytest.fixture
def deployment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DataDir, str, RemoteRiskProcess]]:
    monkeypatch.setenv(MIN_REFRESH_ENV_VAR, str(REFRESH_SECONDS))
    data = DataDir(tmp_path / "data")
    coordinator_keys(data)
    with served(tmp_path) as coordinator:
        remote = RemoteRiskProcess(tmp_path / "remote", f"{coordinator.url}/.well-known/jwks.json")
        remote.start()
        try:
            remote.register_with(data)
            yield data, coordinator.url, remote
        finally:
            remote.stop()


def stranger_spends_the_refresh(remote: RemoteRiskProcess) -> bool:
    """A token under the coordinator's issuer naming a kid nobody published: whether the
    remote fetched the set for it (or had, under a second ago), so that the refresh of a
    whole interval is spent. It says so by the wait it asks for: all of the interval."""
    claims = tokens.delegation_claims(
        now=int(time.time()), issuer=DEFAULT_ISSUER, audience=remote.keys.active.kid,
        scope="risk:interpret", jti="stranger-1",
    )  # fmt: skip
    token = mint_token(Grant.model_validate(claims), SigningKey.generate())
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    refused = httpx.post(remote.base_url + JSONRPC_PATH, json=body, headers=headers, timeout=30)
    assert refused.status_code == 401
    assert refused.json()["error"]["data"][0]["metadata"]["reason"] == "kid_unknown"
    return refused.headers["Retry-After"] == str(REFRESH_SECONDS + 1)


def test_an_at_once_rotation_after_a_stranger_spent_the_refresh_loses_no_delegation(
    deployment: tuple[DataDir, str, RemoteRiskProcess],
) -> None:
    data, api, remote = deployment
    results: list[dict[str, Any]] = []
    rotated = threading.Event()
    after_rotation: list[dict[str, Any]] = []
    stop = threading.Event()
    body = {"to": "remote-risk", "skill": "interpret-risk-policy", "input": PAYLOAD}

    def delegate(http: httpx.Client) -> None:
        while not stop.is_set():
            started_after = rotated.is_set()
            answer = http.post("/v1/delegations", json={**body, "wait": True, "timeout": 60})
            document = answer.json()
            results.append(document)
            if started_after:
                after_rotation.append(document)

    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        httpx.Client(base_url=api, headers=headers, timeout=120, trust_env=False) as http,
        ThreadPoolExecutor(WORKERS) as pool,
    ):
        workers = [pool.submit(delegate, http) for _ in range(WORKERS)]
        try:  # a failure here stops the traffic too, rather than wait for it forever
            wait_for(lambda: len(results) >= WORKERS, 60, "traffic under the first key")
            wait_for(lambda: stranger_spends_the_refresh(remote), 60, "a stranger to spend a fetch")
            rotate = federation(data.root, "keys", "rotate", "--publish-seconds", "0")
            _, err = rotate.communicate(timeout=60)
            assert rotate.returncode == 0, err
            rotated.set()
            wait_for(lambda: len(after_rotation) >= WORKERS, 120, "delegations under the new key")
        finally:
            stop.set()
        for worker in workers:
            worker.result(timeout=120)
    failed = [
        (d.get("local_state"), d.get("reason"))
        for d in results
        if d.get("local_state") != "ACCEPTED"
    ]
    assert not failed, failed[:3]
    with closing(Workspace(data)) as ws:
        ledger = Ledger(ws.engine())
        retries = [
            (document["run_id"], event.data)
            for document in results
            for event in ledger.events(document["run_id"])
            if event.event_type == "handoff.retry_scheduled"
        ]
    refused = [
        (run, data) for run, data in retries if data["cause"] == "dispatch_failed:kid_unknown"
    ]
    assert refused, "the stranger's spend was felt, and outlived"
    assert len({run for run, _ in refused}) == len(refused), "each retried once"
    # what the remote asked for: the rest of its interval and a second, never more
    assert all(data["delay_seconds"] <= REFRESH_SECONDS + 1 for _, data in refused)
