"""A registered but hostile agent, holding its own pinned key, cannot push for another agent.

The receiver is real (a PushReceiver on loopback); the rogue is the test posting signed
notifications about the genuine agent's task, each signed with the rogue's own key, the
one the operator pinned for the rogue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from agent_cards.keys import SigningKey
from contracts import strict_json
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.push import SIGNATURE_HEADER, PushReceiver
from member_kit.server.webhooks import sign_notification
from tests.remote_risk.conftest import RiskPeer, risk_peer
from tests.remote_risk.test_push import receiver, registered

TASK = "task-of-the-genuine-agent"
__all__ = ["receiver"]  # the real receiver on loopback, as test_push starts it


@pytest.fixture(scope="module")
def peer() -> Iterator[RiskPeer]:
    with risk_peer() as running_peer:
        yield running_peer


def _rogue(genuine: RegisteredAgent, key: SigningKey) -> RegisteredAgent:
    """The rogue as registered: its own name and the key the operator pinned for it."""
    pinned = {"keys": [key.public_jwk()]}
    return genuine.model_copy(
        update={"name": "rogue", "pinned_jwks": pinned, "verified_kid": key.kid}
    )


def _attack(
    receiver: PushReceiver,
    agents: tuple[RegisteredAgent, RegisteredAgent],
    path_agent: str,
    key: SigningKey,
    issuer: str,
) -> httpx.Response:
    """Both agents await their own task; the rogue posts about the genuine one's."""

    async def exercise() -> httpx.Response:
        genuine, rogue = agents
        receiver.expect(genuine, TASK)
        receiver.expect(rogue, "task-of-the-rogue")
        return await asyncio.to_thread(_post, receiver, path_agent, key, issuer)

    return asyncio.run(exercise())


def _post(receiver: PushReceiver, path_agent: str, key: SigningKey, issuer: str) -> httpx.Response:
    update = {"taskId": TASK, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
    body = strict_json.dumps({"statusUpdate": update})
    token = sign_notification(
        body,
        key=key,
        issuer=issuer,
        audience=receiver.webhook_url(path_agent),
        task_id=TASK,
        jti=f"jti-{path_agent}-{key.kid[:8]}",
    )
    return httpx.post(
        receiver.webhook_url(path_agent),
        content=body,
        headers={SIGNATURE_HEADER: token, "Content-Type": "application/a2a+json"},
        timeout=10,
    )


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        # at the genuine agent's address, the rogue's key is not one pinned there
        ("genuine", (401, "signature_key_unknown")),
        # at its own address and key, the genuine agent's task is not the rogue's to report
        ("rogue", (404, "unknown_task")),
    ],
)
def test_a_rogue_signing_with_its_own_key_cannot_push_for_the_genuine_agent(
    peer: RiskPeer, receiver: PushReceiver, address: str, reason: tuple[int, str]
) -> None:
    """Either way the rogue posts about the genuine agent's task, it is refused."""
    active = peer.app.state.signing_keys.active
    genuine = registered(peer).model_copy(update={"verified_kid": active.kid})
    rogue_key = SigningKey.generate()
    rogue = _rogue(genuine, rogue_key)
    posing_as = genuine if address == "genuine" else rogue
    refused = _attack(receiver, (genuine, rogue), posing_as.name, rogue_key, posing_as.agent_id)
    assert (refused.status_code, refused.json()["refused"]) == reason
