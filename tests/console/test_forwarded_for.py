"""The console's login throttle counts the peer's own address, not what it claims.

uvicorn believes ``X-Forwarded-For`` from loopback by default, so a script on the same
host (or behind any loopback hop) rotating that header got a fresh throttle bucket on
every try. Against a real coordinator process, forwarded headers are now ignored unless
``FEDERATION_TRUSTED_PROXIES`` names the proxy.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from agent_cards.edge.errors import LimitsError
from agent_cards.edge.limits import EdgeLimits
from coordinator.console.throttle import DEFAULT_ATTEMPTS
from tests.coordinator.served import served

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _failed_logins(url: str, tries: int) -> list[httpx.Response]:
    """``tries`` wrong tokens, each claiming another forwarded client address."""
    answers = []
    with httpx.Client(base_url=url, timeout=30, trust_env=False) as http:
        form = http.get("/console/login", headers={"Accept": "text/html"})
        (csrf,) = CSRF.findall(form.text)
        for index in range(tries):
            forwarded = {"X-Forwarded-For": f"203.0.113.{index + 1}"}
            body = {"csrf": csrf, "token": f"guess-{index}"}
            answers.append(http.post("/console/login", data=body, headers=forwarded))
    return answers


def test_rotating_x_forwarded_for_is_still_throttled(tmp_path: Path) -> None:
    with served(tmp_path) as coordinator:
        answers = _failed_logins(coordinator.url, DEFAULT_ATTEMPTS + 2)
    statuses = [answer.status_code for answer in answers]
    assert statuses[:DEFAULT_ATTEMPTS] == [401] * DEFAULT_ATTEMPTS, statuses
    assert statuses[DEFAULT_ATTEMPTS:] == [429, 429], statuses
    assert int(answers[-1].headers["Retry-After"]) >= 1


def test_a_configured_proxy_is_believed(tmp_path: Path) -> None:
    """With the loopback proxy trusted, each forwarded client has its own count."""
    with served(tmp_path, FEDERATION_TRUSTED_PROXIES="127.0.0.1") as coordinator:
        answers = _failed_logins(coordinator.url, DEFAULT_ATTEMPTS + 2)
    assert [answer.status_code for answer in answers] == [401] * (DEFAULT_ATTEMPTS + 2)


@pytest.mark.parametrize("value", ["*", "proxy.example", "10.0.0.300"])
def test_a_trusted_proxy_is_an_address_or_network(value: str) -> None:
    with pytest.raises(LimitsError):
        EdgeLimits.from_env("FEDERATION_", {"FEDERATION_TRUSTED_PROXIES": value})
    limits = EdgeLimits.from_env("FEDERATION_", {"FEDERATION_TRUSTED_PROXIES": "10.0.0.0/8, ::1"})
    assert limits.trusted_proxies == ("10.0.0.0/8", "::1")
