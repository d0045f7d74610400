"""The floors of figures (1f) and (2f) make the checks they are measured for.

bench.floor is the yardstick of issue 34: remote_risk's checks of a blocking send, each
made once. A floor that skipped one would flatter the goal, so each is attacked here on
the real process as the bench starts it: a forged signature, another audience, a replayed
token, a message for another handoff, an over-long body. The one accepted send's receipt
verifies with the floor's key and states the log it was entered in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_cards.jws import b64url_decode
from agent_cards.keys import KeySet, SigningKey
from agent_cards.signatures.primitive import verify
from bench import services
from bench.floor_governed import GovernedFloor, Refused
from bench.loadgen import send_message_body
from bench.tokens import TokenMinter
from member_kit.trust.issuers import signing_keys

Floor = tuple[services.Running, TokenMinter]
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def floor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Floor]:
    root = tmp_path_factory.mktemp("floor")
    issuer = services.Issuer.create(root)
    with services.floor(root, issuer) as running:
        yield running, TokenMinter(issuer.keys.active, running.audience)


def send(running: services.Running, token: str, body: bytes) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(running.url + "/a2a/jsonrpc", content=body, headers=headers)


def test_a_send_is_answered_with_a_receipt_the_floor_key_verifies(floor: Floor) -> None:
    running, minter = floor
    answer = send(running, minter.mint("h-ok"), send_message_body("h-ok"))
    assert answer.status_code == 200
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    receipt = task["metadata"]["receipt"]
    header, payload, signature = receipt.split(".")
    assert running.data_dir is not None
    key = signing_keys(None, running.data_dir).signing_key().verification_key()
    assert verify(key, f"{header}.{payload}".encode(), b64url_decode(signature))
    claims = json.loads(b64url_decode(payload))
    assert claims["entry"]["task"] == task["id"] and claims["log_tree_size"] >= 1


def test_a_token_is_refused_forged_for_another_audience_or_again(floor: Floor) -> None:
    running, minter = floor
    token = minter.mint("h-once")
    assert send(running, token, send_message_body("h-once")).status_code == 200
    assert send(running, token, send_message_body("h-once")).status_code == 409  # replayed
    other = minter.mint("h-other").rsplit(".", 1)[1]
    forged = minter.mint("h-forged").rsplit(".", 1)[0] + "." + other  # a pinned kid
    assert send(running, forged, send_message_body("h-forged")).status_code == 401
    unknown = TokenMinter(SigningKey.generate(), running.audience).mint("h-unknown")
    assert send(running, unknown, send_message_body("h-unknown")).status_code == 401
    elsewhere = TokenMinter(minter.key, "urn:another").mint("h-else")
    assert send(running, elsewhere, send_message_body("h-else")).status_code == 403


def test_a_message_must_be_the_tokens_handoff_and_within_bounds(floor: Floor) -> None:
    running, minter = floor
    token = minter.mint("h-bound")
    assert send(running, token, send_message_body("h-other")).status_code == 400
    padded = send_message_body("h-bound", data={"brief": {"x": "y" * 70_000}})
    assert send(running, token, padded).status_code == 413


def test_the_governed_floor_refuses_a_receipt_that_binds_another_handoff(
    floor: Floor, tmp_path: Path
) -> None:
    """The governed floor (figure 2f) checks what it receives: a handoff through the
    member floor is accepted, and the same answer given to the next handoff is refused."""
    running, minter = floor
    governed = GovernedFloor(running.url, KeySet(active=minter.key), tmp_path)
    connection = governed.connection()
    answers: list[tuple[int, bytes]] = []
    post = connection.post

    async def recorded(path: str, body: bytes, token: str) -> tuple[int, bytes]:
        answers.append(answers[0] if answers else await post(path, body, token))
        return answers[-1]

    connection.post = recorded  # type: ignore[method-assign]
    assert asyncio.run(governed.handoff(connection)) is True
    with pytest.raises(Refused, match="does not bind"):
        asyncio.run(governed.handoff(connection))
