"""The one webhook address policy, table-driven, at registration and at delivery (issue 13).

Observed: push URLs in NAT64 (``[64:ff9b::7f00:1]``), 6to4 (``[2002:7f00:1::]``),
IPv4-compatible and site-local IPv6 forms reached loopback. Every row below is refused by
a service with the default policy (public delivery on, nothing listed), both when a config
is created and when a notification would be delivered; names are resolved by a resolver
the test controls, so nothing leaves loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from member_kit.server.webhooks import Target, WebhookPolicy, WebhookRefused, pinned_url
from member_kit.trust.addresses import AddressPolicy, embedded_ipv4, host_address
from tests.remote_risk.conftest import RiskPeer, error_of, risk_input, risk_peer
from tests.servers import free_port, running

# A resolver for the test's names: each maps to what a hostile DNS answer would say.
NAMES = {
    "loopback.test": ["127.0.0.1"],
    "mapped.test": ["::ffff:127.0.0.1"],
    "nat64.test": ["64:ff9b::7f00:1"],
    "sixtofour.test": ["2002:7f00:1::"],
    "mixed.test": ["93.184.216.34", "10.0.0.5"],
    "public.test": ["93.184.216.34"],
    "garbage.test": ["not-an-address"],
}
resolved: list[str] = []


async def resolver(host: str, port: int) -> list[str]:
    resolved.append(host)
    if host not in NAMES:
        raise OSError("no such name")
    return NAMES[host]


REFUSED = [
    # IPv6 forms that carry a loopback or private IPv4 address
    ("nat64", "http://[64:ff9b::7f00:1]/hook"),
    ("nat64-local-use", "http://[64:ff9b:1::7f00:1]/hook"),
    ("6to4", "http://[2002:7f00:1::]/hook"),
    ("6to4-private", "http://[2002:a00:1::]/hook"),
    ("ipv4-compatible", "http://[::127.0.0.1]/hook"),
    ("ipv4-compatible-hex", "http://[::7f00:1]/hook"),
    ("ipv4-mapped", "http://[::ffff:127.0.0.1]/hook"),
    ("ipv4-mapped-private", "http://[::ffff:10.0.0.1]/hook"),
    ("ipv4-translated", "http://[::ffff:0:7f00:1]/hook"),
    ("teredo", "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook"),
    ("site-local", "http://[fec0::1]/hook"),
    ("unique-local", "http://[fd12:3456::1]/hook"),
    ("ipv6-loopback", "http://[::1]/hook"),
    ("ipv6-unspecified", "http://[::]/hook"),
    ("link-local-zone", "http://[fe80::1%25eth0]/hook"),
    ("multicast-v6", "http://[ff02::1]/hook"),
    # every IPv4 spelling of loopback, and other special ranges
    ("decimal", "http://2130706433/hook"),
    ("octal", "http://0177.0.0.1/hook"),
    ("hex", "http://0x7f.0.0.1/hook"),
    ("hex-whole", "http://0x7f000001/hook"),
    ("short", "http://127.1/hook"),
    ("short-octal", "http://0177.1/hook"),
    ("trailing-dot", "http://127.0.0.1./hook"),
    ("zero", "http://0/hook"),
    ("private", "http://10.0.0.1/hook"),
    ("shared", "http://100.64.0.1/hook"),
    ("link-local-v4", "http://169.254.169.254/latest"),
    ("multicast-v4", "http://224.0.0.1/hook"),
    ("broadcast", "http://255.255.255.255/hook"),
    # names
    ("localhost", "http://localhost/hook"),
    ("localhost-dot", "http://localhost./hook"),
    ("localhost-case", "http://LocalHost/hook"),
    ("under-localhost", "http://api.localhost/hook"),
]
REFUSED_NAMES = [
    ("name-to-loopback", "http://loopback.test/hook"),
    ("name-to-mapped", "http://mapped.test/hook"),
    ("name-to-nat64", "http://nat64.test/hook"),
    ("name-to-6to4", "http://sixtofour.test/hook"),
    ("name-with-one-private", "http://mixed.test/hook"),
    ("name-trailing-dot", "http://loopback.test./hook"),
    ("name-unresolvable", "http://nowhere.test/hook"),
    ("name-to-garbage", "http://garbage.test/hook"),
]
ALLOWED = [
    ("public-v4", "http://93.184.216.34/hook", "93.184.216.34"),
    ("public-v6", "http://[2606:2800:220:1::]/hook", "2606:2800:220:1::"),
    ("nat64-public", "http://[64:ff9b::5db8:d822]/hook", "64:ff9b::5db8:d822"),
    ("name-to-public", "https://public.test/hook", "93.184.216.34"),
]
POLICY = WebhookPolicy(resolver=resolver)


@pytest.mark.parametrize(("case", "url"), REFUSED + REFUSED_NAMES, ids=lambda v: str(v))
def test_refused_at_delivery(case: str, url: str) -> None:
    with pytest.raises(WebhookRefused):
        asyncio.run(POLICY.target(url))


@pytest.mark.parametrize(("case", "url"), REFUSED, ids=lambda v: str(v))
def test_refused_without_resolving(case: str, url: str) -> None:
    """What no resolver can make acceptable is refused by the syntax check alone."""
    with pytest.raises(WebhookRefused):
        POLICY.check_syntax(url)


@pytest.mark.parametrize(("case", "url", "address"), ALLOWED, ids=lambda v: str(v))
def test_public_targets_are_allowed_and_pinned(case: str, url: str, address: str) -> None:
    """The connection goes to the address that was checked (the name stays in Host/SNI)."""
    target = asyncio.run(POLICY.target(url))
    assert target.address == address
    assert address in pinned_url(target)


def test_each_delivery_resolves_once() -> None:
    resolved.clear()
    asyncio.run(POLICY.target("https://public.test/hook"))
    assert resolved == ["public.test"]


def test_listed_networks_apply_to_the_ipv4_inside() -> None:
    """An operator who lists 127.0.0.0/8 allows loopback in any spelling, nothing more."""
    policy = AddressPolicy.from_strings(["127.0.0.0/8"], allow_public=False)
    for host in ("127.0.0.1", "::ffff:127.0.0.1", "0x7f.1", "2130706433"):
        address = host_address(host)
        assert address is not None and policy.allows(address), host
    assert not policy.allows(ipaddress.ip_address("10.0.0.1"))
    assert not policy.allows(ipaddress.ip_address("::1"))


def test_embedded_ipv4_reads_every_transition_form() -> None:
    cases = {
        "::ffff:1.2.3.4": ["1.2.3.4"],
        "64:ff9b::102:304": ["1.2.3.4"],
        "2002:102:304::": ["1.2.3.4"],
        "::1.2.3.4": ["1.2.3.4"],
        "::1": [],
        "2001:4860::1": [],
    }
    for text, expected in cases.items():
        found = [str(a) for a in embedded_ipv4(ipaddress.ip_address(text))]
        assert found == expected, text


def test_pinned_url_keeps_path_and_port() -> None:
    target = Target(url="https://public.test:8443/a/b?c=1", host="public.test", address="::1")
    assert pinned_url(target) == "https://[::1]:8443/a/b?c=1"


# --- over HTTP: registration ---------------------------------------------------------------


@pytest.fixture(scope="module")
def peer() -> Iterator[RiskPeer]:
    with risk_peer() as running_peer:
        running_peer.app.state.push.delivery.policy = POLICY
        yield running_peer


@pytest.mark.parametrize(("case", "url"), REFUSED + REFUSED_NAMES, ids=lambda v: str(v))
def test_a_config_for_a_refused_address_is_not_created(peer: RiskPeer, case: str, url: str) -> None:
    task = peer.send(risk_input())
    answer = peer.call("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url})
    assert error_of(answer)["code"] == -32602


@pytest.mark.parametrize(("case", "url"), REFUSED, ids=lambda v: str(v))
def test_an_inline_config_for_a_refused_address_refuses_the_send(
    peer: RiskPeer, case: str, url: str
) -> None:
    tasks_before = len(peer.app.state.task_store)
    configuration: dict[str, Any] = {"taskPushNotificationConfig": {"url": url}}
    message = {
        "messageId": f"m-{case}",
        "role": "ROLE_USER",
        "parts": [{"data": risk_input(), "mediaType": "application/json"}],
    }
    answer = peer.call("SendMessage", {"message": message, "configuration": configuration})
    assert error_of(answer)["code"] == -32602
    assert len(peer.app.state.task_store) == tasks_before


def test_a_name_that_resolves_to_loopback_is_refused_at_delivery(peer: RiskPeer) -> None:
    """An inline config naming a host passes the syntax check; at delivery the name
    resolves to loopback, and nothing is sent to the receiver listening there."""
    hits: list[bytes] = []

    async def hook(request: Request) -> Response:
        hits.append(await request.body())
        return Response(status_code=204)

    port = free_port()
    receiver = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    with running(receiver, port=port):
        url = f"http://loopback.test:{port}/hook"
        configuration = {"taskPushNotificationConfig": {"url": url}}
        task = peer.send(risk_input(), configuration)
        delivery = peer.app.state.push.delivery
        deadline = time.monotonic() + 10
        while not [r for r in delivery.history if r.url == url] and time.monotonic() < deadline:
            time.sleep(0.05)
    records = [r for r in delivery.history if r.url == url]
    assert records and task["id"] in {r.task_id for r in records}
    assert all(not r.delivered and "WebhookRefused" in (r.last_error or "") for r in records)
    assert hits == []
