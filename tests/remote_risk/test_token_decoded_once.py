"""A send's delegation token is decoded and checked once, and nothing is done twice.

remote_risk on loopback (the member runs in this process), sent tokens as the
coordinator mints them (compact JSON). Each count is taken at the one module that does
the work: per send, one reading of the bearer token and of the holder's proof from the
headers, one signature verification, one validation of the claims as a grant, one
claims digest, one decoding of the payload; and the header of an issuer key whose
token already verified is not decoded again (it is the same text every time).
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_cards.jws import b64url_encode
from contracts.grant import Grant
from coordinator.authority.tokens import mint_token
from member_kit.server.authorization import hook as auth
from member_kit.server.authorization.hook import DelegationAuthorizer
from member_kit.trust import token_format, verifier
from tests import tokens
from tests.remote_risk.delegated import ISSUER, Caller, delegated_service
from tests.tokens import COORDINATOR_KEY

SENDS = 4


@pytest.fixture
def service() -> Iterator[tuple[Caller, Any]]:
    with delegated_service() as running:
        yield running


def minted(caller: Caller, handoff_id: str) -> str:
    """A token for ``handoff_id`` as the coordinator mints it (compact JSON)."""
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
        handoff_id=handoff_id,
        jti=f"jti-{handoff_id}",
    )
    return mint_token(claims, COORDINATOR_KEY)


def counting(monkeypatch: pytest.MonkeyPatch, counts: collections.Counter[str]) -> None:
    """Count, from now on, the calls of each step of a token's check where it is made."""

    def spy(module: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        @functools.wraps(real)
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    spy(auth, "bearer_token")
    spy(DelegationAuthorizer, "_holder")  # the request a holder's proof is checked against
    spy(token_format, "json_object")
    spy(token_format, "verify")  # the signature primitive, as the token's check calls it
    spy(verifier, "claims_digest")
    validate = Grant.model_validate.__func__  # type: ignore[attr-defined]

    def validated(cls: type[Grant], *args: Any, **kwargs: Any) -> Grant:
        counts["Grant.model_validate"] += 1
        grant: Grant = validate(cls, *args, **kwargs)
        return grant

    monkeypatch.setattr(Grant, "model_validate", classmethod(validated))


def test_each_check_of_a_send_token_is_made_once(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    caller, _ = service
    caller.task_of(caller.send("run-warm", "ho-warm", token=minted(caller, "ho-warm")))
    ready = {f"ho-{n}": minted(caller, f"ho-{n}") for n in range(SENDS)}
    counts: collections.Counter[str] = collections.Counter()
    counting(monkeypatch, counts)
    for handoff_id, token in ready.items():
        task = caller.task_of(caller.send("run-1", handoff_id, token=token))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    monkeypatch.undo()
    assert counts == {
        "bearer_token": SENDS,  # read from the headers before the body, and kept
        "_holder": SENDS,
        "verify": SENDS,
        "Grant.model_validate": SENDS,
        "claims_digest": SENDS,
        "json_object": SENDS,  # the payload: the key's header was decoded by the first send
    }


def test_a_header_never_verified_is_decoded_for_every_token(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a header whose token verified is remembered: a forged one is read each time."""
    caller, _ = service
    forged = tokens.alter_signature(minted(caller, "ho-forged"))
    counts: collections.Counter[str] = collections.Counter()
    counting(monkeypatch, counts)
    for _ in range(2):
        refused = caller.send("run-1", "ho-forged", token=forged)
        assert refused.status_code == 401
    monkeypatch.undo()
    assert counts["json_object"] == 4  # header and payload, twice
    assert counts["verify"] == 2


def test_the_remembered_headers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``limit`` header texts are remembered; a full memory starts again."""
    headers = token_format.VerifiedHeaders(limit=2)
    segments = [
        b64url_encode(f'{{"alg":"EdDSA","kid":"{kid}","typ":"delegation+jwt"}}'.encode())
        for kid in (COORDINATOR_KEY.kid, "a" * 43, "b" * 43)
    ]
    counts: collections.Counter[str] = collections.Counter()
    counting(monkeypatch, counts)
    for segment in segments[:2]:
        headers.verified(segment, *headers.checked(segment))
    assert [headers.checked(segment)[1] for segment in segments[:2]] == [
        COORDINATOR_KEY.kid,
        "a" * 43,
    ]
    assert counts["json_object"] == 2  # each decoded once, then answered from memory
    headers.verified(segments[2], *headers.checked(segments[2]))
    headers.checked(segments[0])
    assert counts["json_object"] == 4  # the third filled the memory: the first is read again
