"""Nobody sharing the operator's address can lock the operator out of the console.

Against a real coordinator process: a neighbour on the operator's loopback address fails
the login form past the limit and is refused 429 ``login_throttled``; the operator, from
the same address, logs in with the right token at once; the neighbour's next wrong token
is still refused 429. The same wrong token from a fresh address each time is throttled
too: its fingerprint is counted, not only its address.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from coordinator.console.throttle import DEFAULT_ATTEMPTS
from tests.coordinator.served import TOKEN, Served, served

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served(tmp_path_factory.mktemp("console")) as running:
        yield running


def _login(url: str, token: str, address: str) -> httpx.Response:
    """One login with ``token`` from the loopback ``address``, through a fresh form."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=url, transport=transport, timeout=30, trust_env=False) as http:
        form = http.get("/console/login", headers={"Accept": "text/html"})
        (csrf,) = CSRF.findall(form.text)
        return http.post("/console/login", data={"csrf": csrf, "token": token})


def _throttled(answer: httpx.Response) -> bool:
    return answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1


def test_a_neighbour_cannot_lock_the_operator_out_of_the_console(coordinator: Served) -> None:
    address = "127.0.0.2"
    tries = [_login(coordinator.url, f"guess-{n}", address) for n in range(DEFAULT_ATTEMPTS + 2)]
    statuses = [answer.status_code for answer in tries]
    assert statuses[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS, statuses
    assert all(_throttled(answer) for answer in tries[DEFAULT_ATTEMPTS:])
    operator = _login(coordinator.url, TOKEN, address)
    assert operator.status_code == 303 and operator.headers["location"] == "/console/runs"
    assert _throttled(_login(coordinator.url, "guess-again", address))


def test_one_wrong_token_is_throttled_from_every_address(coordinator: Served) -> None:
    tries = [
        _login(coordinator.url, "a-stale-console-token", f"127.0.3.{n + 1}")
        for n in range(DEFAULT_ATTEMPTS + 2)
    ]
    statuses = [answer.status_code for answer in tries]
    assert statuses[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS, statuses
    assert all(_throttled(answer) for answer in tries[DEFAULT_ATTEMPTS:])
