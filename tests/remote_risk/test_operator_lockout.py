"""Nobody sharing the operator's address can lock the operator out.

Failed operator tokens were counted per client address, and past five the address was
refused 429 whatever it presented: a co-located process (same loopback address) sending
five wrong tokens locked the operator out of remote_risk's ``/audit`` and ``/metrics``
and the coordinator's API for a minute. Now the right token always passes; a wrong one is
still refused 429 ``token_throttled`` once its address, or the token itself from any
address, has failed too often. The operator's success resets nobody's count.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent_cards import tls
from agent_cards.edge.limits import EdgeLimits
from agent_cards.edge.protocol import uvicorn_options
from agent_cards.edge.throttle import DEFAULT_ATTEMPTS
from coordinator.authority.identity import coordinator_keys
from coordinator.service.http.api import create_api
from coordinator.service.settings import CoordinatorSettings
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.servers import free_port, running

AUDIT = "audit-token-for-tests-0123456789abcdef"
METRICS = "metrics-token-for-tests-0123456789abcdef"
OPERATOR = "operator-token-for-tests-0123456789abcdef"
EDGE = uvicorn_options(EdgeLimits())


@pytest.fixture(scope="module")
def risk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        data_dir=tmp_path_factory.mktemp("risk"),
        audit_token=AUDIT,
        metrics_token=METRICS,
    )
    with running(create_app(settings), port=port, **EDGE) as url:
        yield url


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = DataDir(tmp_path_factory.mktemp("coordinator") / "data")
    coordinator_keys(data)
    ws = Workspace(data)
    try:
        with running(create_api(ws, CoordinatorSettings(operator_token=OPERATOR)), **EDGE) as url:
            yield url
    finally:
        ws.close()


def _get(url: str, token: str, address: str = "127.0.0.1") -> httpx.Response:
    """GET ``url`` with ``token`` from the loopback ``address`` (all of 127/8 is ours)."""
    transport = httpx.HTTPTransport(local_address=address, verify=tls.verified())
    with httpx.Client(transport=transport, timeout=10, trust_env=False) as client:
        return client.get(url, headers={"Authorization": f"Bearer {token}"})


def _statuses(answers: list[httpx.Response]) -> list[int]:
    return [answer.status_code for answer in answers]


def _throttled(answer: httpx.Response) -> bool:
    reason = answer.json()["error"]["reason"]
    return (
        answer.status_code == 429
        and reason == "token_throttled"
        and "Retry-After" in answer.headers
    )


def _locked_out_attempt(url: str, right: str, address: str) -> None:
    """A neighbour on ``address`` fails past the limit; then the operator, from the same
    address, presents the right token; then the neighbour tries once more."""
    neighbour = [_get(url, f"neighbour-guess-{n:02d}-{'x' * 24}", address) for n in range(7)]
    assert _statuses(neighbour)[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS
    assert all(_throttled(answer) for answer in neighbour[DEFAULT_ATTEMPTS:])
    assert _get(url, right, address).status_code == 200
    assert _throttled(_get(url, f"neighbour-again-{'y' * 24}", address))


@pytest.mark.parametrize(
    ("path", "right", "address"),
    [
        ("/audit/head", AUDIT, "127.0.0.2"),
        ("/metrics", METRICS, "127.0.0.3"),
    ],
)
def test_a_neighbour_cannot_lock_the_remote_risk_operator_out(
    risk: str, path: str, right: str, address: str
) -> None:
    _locked_out_attempt(risk + path, right, address)


def test_a_neighbour_cannot_lock_the_coordinator_operator_out(api: str) -> None:
    _locked_out_attempt(api + "/v1/runs", OPERATOR, "127.0.0.4")


@pytest.mark.parametrize("path", ["/audit/head", "/metrics"])
def test_one_wrong_token_is_throttled_from_every_address(risk: str, path: str) -> None:
    """The same wrong token tried from a fresh address each time: its fingerprint is
    counted, so moving to another address does not buy it more tries."""
    stale = f"a-stale-token-{path.strip('/')}-{'z' * 24}"
    offset = 10 if path == "/metrics" else 20
    answers = [_get(risk + path, stale, f"127.0.1.{offset + n}") for n in range(7)]
    assert _statuses(answers)[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS
    assert all(_throttled(answer) for answer in answers[DEFAULT_ATTEMPTS:])
    fresh = _get(risk + path, f"another-wrong-token-{'w' * 24}", f"127.0.1.{offset + 9}")
    assert fresh.status_code == 401  # another token from a fresh address is only wrong


def test_one_wrong_token_is_throttled_from_every_address_at_the_api(api: str) -> None:
    stale = f"a-stale-operator-token-{'z' * 24}"
    answers = [_get(api + "/v1/runs", stale, f"127.0.2.{n + 1}") for n in range(7)]
    assert _statuses(answers)[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS
    assert all(_throttled(answer) for answer in answers[DEFAULT_ATTEMPTS:])
