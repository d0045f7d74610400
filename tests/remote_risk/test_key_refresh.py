"""remote_risk follows an issuer's key rotation without a restart (issue 13).

Observed: after ``federation keys rotate`` every delegation failed until remote_risk was
restarted, since the new key signed at once and remote_risk read an issuer's keys only at
start. Here the coordinator's keys rotate while remote_risk runs and requests keep
coming; remote_risk, given the issuer's JWK Set by URL, refreshes it on an unknown kid
(rate-limited), honours its cache time, and keeps the last good set when a refresh fails.
The refresh policy and a stranger's made-up kid are held against each member of
``tests/members.py`` (remote_risk and the terms member built on the kit) alike.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards import tls
from agent_cards.keys import KeySet, SigningKey, load_key_set
from contracts.grant import Grant
from coordinator.authority import identity
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.tokens import mint_token
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from member_kit.server.app import JSONRPC_PATH
from member_kit.trust.issuers import load_trusted_issuers
from remote_risk.settings import REST_PATH
from tests import tokens
from tests.members import MEMBERS, RISK, MemberUnderTest
from tests.servers import free_port, running

_jtis = itertools.count(1)


@pytest.fixture(params=sorted(MEMBERS))
def member(request: pytest.FixtureRequest) -> MemberUnderTest:
    return MEMBERS[request.param]


def minted(key: SigningKey, audience: str, member: MemberUnderTest) -> tuple[str, dict[str, Any]]:
    """A token signed by ``key`` for ``member``, and a message of its skill's default."""
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=DEFAULT_ISSUER,
        audience=audience,
        scope=member.scope,
        jti=f"rot-{next(_jtis)}",
    )
    message = {
        "messageId": f"m-{next(_jtis)}",
        "role": "ROLE_USER",
        "parts": [{"data": member.valid_input(), "mediaType": "application/json"}],
        "metadata": {"handoffId": "handoff-7", "attempt": 1},
    }
    return mint_token(Grant.model_validate(claims), key), message


def send(
    base_url: str, key: SigningKey, audience: str, member: MemberUnderTest = RISK
) -> httpx.Response:
    token, message = minted(key, audience, member)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    return httpx.post(
        base_url + JSONRPC_PATH, json=body, headers=headers, timeout=30, verify=tls.verified()
    )


def completed(response: httpx.Response) -> bool:
    if response.status_code != 200:
        return False
    result = response.json().get("result")
    return bool(result) and result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def reason(response: httpx.Response) -> str:
    return str(response.json()["error"]["data"][0]["metadata"]["reason"])


def remote_trusting(
    jwks_url: str, min_interval: float, member: MemberUnderTest = RISK
) -> tuple[Any, int]:
    port = free_port()
    directory = load_trusted_issuers([f"{DEFAULT_ISSUER}={jwks_url}"], min_interval=min_interval)
    app = member.create_app(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers=directory,
        signing_keys=KeySet(active=SigningKey.generate()),
    )
    return app, port


# --- rotation under load, against the real coordinator's JWK Set ----------------------------


@pytest.fixture
def coordinator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DataDir, str]]:
    monkeypatch.delenv("FEDERATION_ISSUER", raising=False)
    data = DataDir(tmp_path / "coordinator")
    identity.coordinator_keys(data)
    ws = Workspace(data)
    settings = CoordinatorSettings(operator_token="operator-token-for-tests-0123456789")
    with running(create_api(ws, settings)) as url:
        yield data, url
    ws.close()


# remote_risk only: this follows the real coordinator's rotation under load (no attack); the
# kit's refresh it relies on is held on every member by the tests below.
@pytest.mark.parametrize("publish_seconds", [1, 0], ids=["published-first", "at-once"])
def test_rotation_under_load_fails_no_delegation(
    coordinator: tuple[DataDir, str], publish_seconds: int
) -> None:
    data, api = coordinator
    app, port = remote_trusting(api + "/.well-known/jwks.json", min_interval=0.2)
    results: list[httpx.Response] = []
    kids: set[str] = set()
    stop = threading.Event()

    def load(base_url: str) -> None:
        while not stop.is_set():
            key = load_key_set(data.path("keys")).signing_key()  # as each `delegate` does
            kids.add(key.kid)
            results.append(send(base_url, key, app.state.settings.agent_id))

    with running(app, port=port) as base_url, ThreadPoolExecutor(4) as pool:
        workers = [pool.submit(load, base_url) for _ in range(4)]
        try:  # a failure here stops the load too, rather than wait for it forever
            time.sleep(0.5)
            identity.rotate(data, grace_seconds=60, publish_seconds=publish_seconds)
            time.sleep(publish_seconds + 1.5)
        finally:
            stop.set()
        for worker in workers:
            worker.result(timeout=30)
    failed = [(r.status_code, r.text[:200]) for r in results if not completed(r)]
    assert not failed, failed[:3]
    assert len(kids) == 2, "requests were signed with the old and the new key"
    assert len(results) >= 8


# --- refresh policy, against a JWK Set host the test controls --------------------------------


class JWKSHost:
    def __init__(self) -> None:
        self.document: dict[str, Any] = {}
        self.status = 200
        self.cache_control = "public, max-age=300"
        self.hits = 0

    async def jwks(self, request: Request) -> Response:
        self.hits += 1
        if self.status != 200:
            return Response(status_code=self.status)
        return JSONResponse(self.document, headers={"Cache-Control": self.cache_control})


@pytest.fixture
def host() -> Iterator[tuple[JWKSHost, str]]:
    jwks_host = JWKSHost()
    app = Starlette(routes=[Route("/jwks.json", jwks_host.jwks)])
    with running(app) as url:
        yield jwks_host, url + "/jwks.json"


A = SigningKey.generate()
B = SigningKey.generate()


def test_a_refresh_with_a_wrong_kid_or_a_failure_keeps_the_last_good_set(
    host: tuple[JWKSHost, str], caplog: pytest.LogCaptureFixture, member: MemberUnderTest
) -> None:
    jwks_host, url = host
    jwks_host.document = {"keys": [A.public_jwk()]}
    app, port = remote_trusting(url, min_interval=0.0, member=member)
    audience = app.state.settings.agent_id
    with running(app, port=port) as base_url:
        jwks_host.document = {"keys": [A.public_jwk(), {**B.public_jwk(), "kid": A.kid}]}
        with caplog.at_level(logging.WARNING, logger="member_kit.trust.refresh"):
            refused = send(base_url, B, audience, member)
        assert (refused.status_code, reason(refused)) == (401, "kid_unknown")
        assert "kid_not_thumbprint" in caplog.text
        assert completed(send(base_url, A, audience, member))
        jwks_host.status = 500
        assert reason(send(base_url, B, audience, member)) == "kid_unknown"
        assert completed(send(base_url, A, audience, member))
        jwks_host.status = 200
        jwks_host.document = {"keys": [A.public_jwk(), B.public_jwk()]}
        assert completed(send(base_url, B, audience, member))


def test_unknown_kids_refresh_at_most_once_per_interval(
    host: tuple[JWKSHost, str], member: MemberUnderTest
) -> None:
    jwks_host, url = host
    jwks_host.document = {"keys": [A.public_jwk()]}
    app, port = remote_trusting(url, min_interval=60.0, member=member)
    with running(app, port=port) as base_url:
        jwks_host.document = {"keys": [A.public_jwk(), B.public_jwk()]}
        for _ in range(5):
            assert reason(send(base_url, B, app.state.settings.agent_id, member)) == "kid_unknown"
    assert jwks_host.hits == 1, "only the fetch at start, within the minimum interval"


def test_an_expired_cache_is_refreshed_in_the_background(
    host: tuple[JWKSHost, str], member: MemberUnderTest
) -> None:
    jwks_host, url = host
    jwks_host.document = {"keys": [A.public_jwk()]}
    jwks_host.cache_control = "max-age=1"
    app, port = remote_trusting(url, min_interval=0.0, member=member)
    with running(app, port=port) as base_url:
        assert completed(send(base_url, A, app.state.settings.agent_id, member))
        hits = jwks_host.hits
        time.sleep(1.2)
        deadline = time.monotonic() + 10
        while jwks_host.hits == hits and time.monotonic() < deadline:
            assert completed(send(base_url, A, app.state.settings.agent_id, member))
            time.sleep(0.1)
    assert jwks_host.hits > hits


# --- a stranger cannot spend the refresh a new key needs (issue 31, 6) -----------------------


def send_rest(
    base_url: str, key: SigningKey, audience: str, member: MemberUnderTest
) -> httpx.Response:
    """The same send on the HTTP+JSON binding."""
    token, message = minted(key, audience, member)
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    return httpx.post(
        base_url + REST_PATH + "/message:send",
        json={"message": message},
        headers=headers,
        verify=tls.verified(),
    )


def test_a_key_refused_after_a_stranger_spent_the_refresh_is_fetched_by_the_time_it_says(
    host: tuple[JWKSHost, str], member: MemberUnderTest
) -> None:
    """A stranger's token naming a fresh kid spends the interval's refresh; the issuer's
    real new key, first used right after, is refused ``kid_unknown`` with when to come
    back (Retry-After on HTTP, ``retryAfterSeconds`` in the ErrorInfo metadata on both
    bindings), and the set is fetched again by then with nobody asking: one fetch per
    interval, the stranger's and the one due after the refusal."""
    jwks_host, url = host
    jwks_host.document = {"keys": [A.public_jwk()]}
    interval = 3
    app, port = remote_trusting(url, min_interval=interval, member=member)
    audience = app.state.settings.agent_id
    with running(app, port=port) as base_url:
        assert reason(send(base_url, SigningKey.generate(), audience, member)) == "kid_unknown"
        spent = jwks_host.hits  # the fetch at start, and the stranger's unless it came too soon
        jwks_host.document = {"keys": [A.public_jwk(), B.public_jwk()]}
        answers = [send(base_url, B, audience, member), send_rest(base_url, B, audience, member)]
        for answer in answers:
            assert answer.status_code == 401
            wait = int(answer.headers["Retry-After"])
            assert 1 <= wait <= interval + 1
        assert answers[0].json()["error"]["data"][0]["metadata"]["retryAfterSeconds"]
        assert answers[1].json()["error"]["details"][0]["metadata"]["reason"] == "kid_unknown"
        assert answers[1].json()["error"]["details"][0]["metadata"]["retryAfterSeconds"]
        deadline = time.monotonic() + 30  # a failure guard only: the fetch is awaited as an event
        while jwks_host.hits == spent:
            assert time.monotonic() < deadline, "the fetch due after the refusal never came"
            time.sleep(0.05)
        assert completed(send(base_url, B, audience, member))
    assert jwks_host.hits == spent + 1, "no fetch beyond the one due"


def test_a_refused_unknown_kid_of_a_file_issuer_says_no_retry_after(
    tmp_path: Path, member: MemberUnderTest
) -> None:
    """Keys read from a file never change: nothing to wait for, no Retry-After."""
    pinned = tmp_path / "issuer.jwks.json"
    pinned.write_text(json.dumps({"keys": [A.public_jwk()]}))
    port = free_port()
    app = member.create_app(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers=load_trusted_issuers([f"{DEFAULT_ISSUER}={pinned}"]),
        signing_keys=KeySet(active=SigningKey.generate()),
    )
    with running(app, port=port) as base_url:
        refused = send(base_url, B, app.state.settings.agent_id, member)
    assert (refused.status_code, reason(refused)) == (401, "kid_unknown")
    assert "Retry-After" not in refused.headers
    assert "retryAfterSeconds" not in refused.json()["error"]["data"][0]["metadata"]
