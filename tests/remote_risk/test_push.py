"""Push notifications from remote_risk to a receiver started in the test, over loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from contracts import strict_json
from contracts.wire import Task, TaskState, to_wire
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.push import SIGNATURE_HEADER, PushReceiver
from coordinator.remote.streaming import RemoteUpdates
from coordinator.remote.wire.client import A2AClient
from member_kit.server.webhooks import WebhookPolicy, WebhookRefused, sign_notification
from tests.remote_risk.conftest import RiskPeer, error_of, risk_input, risk_peer
from tests.servers import free_port, running

LOOPBACK = ("127.0.0.0/8",)


@pytest.fixture
def push_peer() -> Iterator[RiskPeer]:
    """A risk service allowed to push to loopback, with each task WORKING for a moment."""
    with risk_peer(
        skill_delay_seconds=0.5, push_allowed_networks=LOOPBACK, push_first_backoff_seconds=0.05
    ) as running_peer:
        yield running_peer


@pytest.fixture
def receiver() -> Iterator[PushReceiver]:
    port = free_port()
    push_receiver = PushReceiver(f"http://127.0.0.1:{port}")
    with running(push_receiver.app, port=port):
        yield push_receiver


def registered(peer: RiskPeer, name: str = "risk") -> RegisteredAgent:
    """The risk service as the coordinator registered it: card and pinned keys."""
    app = peer.app
    return RegisteredAgent(
        name=name,
        card_url=peer.base_url + "/.well-known/agent-card.json",
        endpoint=app.state.settings.jsonrpc_url,
        card=to_wire(app.state.card),
        registered_at="2026-01-01T00:00:00Z",
        pinned_jwks=app.state.signing_keys.public_jwks(),
    )


def test_pushed_updates_verify_and_are_confirmed_by_get_task(
    push_peer: RiskPeer, receiver: PushReceiver
) -> None:
    """Signed updates reach the receiver, verify against the card's pinned keys, and the
    settled state they report is confirmed with GetTask before it is returned."""
    agent = registered(push_peer)
    task = push_peer.send(risk_input(), {"returnImmediately": True})
    config = {"taskId": task["id"], "id": "hook-1", "url": receiver.webhook_url(agent.name)}

    async def follow() -> Any:
        inbox = receiver.expect(agent, task["id"])
        push_peer.result("CreateTaskPushNotificationConfig", config)
        async with A2AClient() as client:
            updates = RemoteUpdates(
                client, agent.endpoint, Task.model_validate(task), {}, source=inbox.events
            )
            observed = await updates.next(30)
            while observed.status.state is not TaskState.COMPLETED:
                observed = await updates.next(30)
            await updates.aclose()
            return observed, updates.notes

    observed, notes = asyncio.run(follow())
    assert notes == []
    assert observed.artifacts and observed.artifacts[0].name == "risk-finding"
    listed = push_peer.result("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [c["id"] for c in listed["configs"]] == ["hook-1"]


def _signed_post(
    receiver: PushReceiver,
    agent: RegisteredAgent,
    body: bytes,
    key: SigningKey,
    *,
    sent_body: bytes | None = None,
    jti: str = "jti-1",
    audience: str | None = None,
    issuer: str | None = None,
) -> httpx.Response:
    token = sign_notification(
        body,
        key=key,
        issuer=issuer or identity_of(key.verification_key()),
        audience=audience or receiver.webhook_url(agent.name),
        task_id="task-1",
        jti=jti,
    )
    return httpx.post(
        receiver.webhook_url(agent.name),
        content=sent_body if sent_body is not None else body,
        headers={SIGNATURE_HEADER: token, "Content-Type": "application/a2a+json"},
        timeout=10,
    )


def _status_body(state: str = "TASK_STATE_WORKING") -> bytes:
    update = {"taskId": "task-1", "contextId": "c", "status": {"state": state}}
    return strict_json.dumps({"statusUpdate": update})


def test_receiver_refuses_tampering_and_drops_replays(
    push_peer: RiskPeer, receiver: PushReceiver
) -> None:
    """The receiver accepts one signed update once: the same jti again is dropped, and a
    changed body, a foreign key or another audience is refused with 401."""
    agent = registered(push_peer)
    key = push_peer.app.state.signing_keys.active

    async def exercise() -> tuple[list[httpx.Response], int]:
        inbox = receiver.expect(agent, "task-1")
        body = _status_body()
        responses = [
            await asyncio.to_thread(_signed_post, receiver, agent, body, key),
            await asyncio.to_thread(_signed_post, receiver, agent, body, key),
            await asyncio.to_thread(
                _signed_post,
                receiver,
                agent,
                body,
                key,
                sent_body=_status_body("TASK_STATE_COMPLETED"),
                jti="j2",
            ),
            await asyncio.to_thread(
                _signed_post, receiver, agent, body, SigningKey.generate(), jti="j3"
            ),
            await asyncio.to_thread(
                _signed_post, receiver, agent, body, key, jti="j4", audience="http://elsewhere/"
            ),
            # iss a URL (what a card names), not the identity the signing key proves
            await asyncio.to_thread(
                _signed_post, receiver, agent, body, key, jti="j5", issuer=agent.endpoint
            ),
        ]
        await asyncio.sleep(0)
        return responses, inbox.pending()

    responses, pending = asyncio.run(exercise())
    accepted, replayed, tampered, foreign, misaddressed, misnamed = responses
    assert accepted.json() == {"accepted": True, "duplicate": False}
    assert replayed.status_code == 200 and replayed.json()["duplicate"] is True
    assert (tampered.status_code, tampered.json()["refused"]) == (401, "body_hash_mismatch")
    assert (foreign.status_code, foreign.json()["refused"]) == (401, "signature_key_unknown")
    assert (misaddressed.status_code, misaddressed.json()["refused"]) == (401, "audience_mismatch")
    assert (misnamed.status_code, misnamed.json()["refused"]) == (401, "issuer_mismatch")
    assert pending == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest",
        "http://localhost:8080/hook",
        "http://[::1]:8080/hook",
        "ftp://example.com/hook",
        "http://user:secret@example.com/hook",
        "/relative/hook",
    ],
)
def test_disallowed_webhook_urls_are_refused(peer: RiskPeer, url: str) -> None:
    """A config whose URL is private, loopback, link-local, not http(s) or carries
    credentials is refused with -32602 by a service with the default policy."""
    task = peer.send(risk_input())
    error = error_of(
        peer.call("CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url})
    )
    assert error["code"] == -32602


def test_webhook_policy_checks_every_resolved_address() -> None:
    """A name that resolves to any address outside the allowed ones is refused before
    delivery; public addresses pass unless public delivery is switched off."""

    async def resolver(host: str, port: int) -> list[str]:
        return {"public.test": ["93.184.216.34"], "sneaky.test": ["93.184.216.34", "10.0.0.5"]}[
            host
        ]

    policy = WebhookPolicy(allow_public=True, resolver=resolver)
    closed = WebhookPolicy(
        (ipaddress.ip_network("127.0.0.0/8"),), allow_public=False, resolver=resolver
    )

    async def check() -> None:
        target = await policy.target("https://public.test/hook")
        assert target.address == "93.184.216.34"
        with pytest.raises(WebhookRefused):
            await policy.target("https://sneaky.test/hook")
        with pytest.raises(WebhookRefused):
            await closed.target("https://public.test/hook")
        assert (await closed.target("http://127.0.0.1:9/hook")).address == "127.0.0.1"

    asyncio.run(check())


def test_a_receiver_that_is_down_is_retried_then_given_up(push_peer: RiskPeer) -> None:
    """Delivery to a webhook nobody listens on is tried the configured number of times
    and then given up, while the task itself completes."""
    url = f"http://127.0.0.1:{free_port()}/hook"
    task = push_peer.send(risk_input(), {"taskPushNotificationConfig": {"url": url}})
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    delivery = push_peer.app.state.push.delivery
    deadline = time.monotonic() + 30
    while not [r for r in delivery.history if r.url == url] and time.monotonic() < deadline:
        time.sleep(0.05)
    records = [r for r in delivery.history if r.url == url]
    assert records, "no delivery outcome recorded"
    assert all(not r.delivered for r in records)
    assert records[0].attempts == push_peer.app.state.settings.push_attempts
    assert "ConnectError" in (records[0].last_error or "")


def test_push_config_operations(push_peer: RiskPeer) -> None:
    """Create, get, list and delete a config; deleting twice succeeds, a missing config
    or task is -32001."""
    task = push_peer.send(risk_input())
    config = {"taskId": task["id"], "id": "c1", "url": "http://127.0.0.1:9/hook"}
    created = push_peer.result("CreateTaskPushNotificationConfig", config)
    assert created == config
    params = {"taskId": task["id"], "id": "c1"}
    assert push_peer.result("GetTaskPushNotificationConfig", params) == config
    assert push_peer.result("DeleteTaskPushNotificationConfig", params) == {}
    assert push_peer.result("DeleteTaskPushNotificationConfig", params) == {}
    assert error_of(push_peer.call("GetTaskPushNotificationConfig", params))["code"] == -32001
    missing = {"taskId": "no-such-task", "id": "c1"}
    assert error_of(push_peer.call("GetTaskPushNotificationConfig", missing))["code"] == -32001
