"""Holder-bound tokens at a running member (RFC 9449 DPoP), on loopback.

A token naming a holder key (``cnf.jkt``) is accepted only with a fresh proof by that
key over the very request, on every binding (they all call the one verifier). Stolen
(no proof, or a proof by the thief's key), replayed, late, for another request or
another token, or malformed: each refused with its stable reason, before anything runs.
A token without ``cnf`` is not affected.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_cards.dpop import sign_jws_with_jwk
from agent_cards.keys import SigningKey, b64url_decode
from coordinator.authority.holder import proof
from member_kit.server.app import JSONRPC_PATH
from tests import tokens
from tests.remote_risk.delegated import ISSUER, Caller, delegated_service, refusal_reason
from tests.tokens import COORDINATOR_KEY, header

HOLDER = SigningKey.generate()
THIEF = SigningKey.generate()


@pytest.fixture
def member() -> Iterator[Caller]:
    with delegated_service() as (caller, _app):
        yield caller


def bound_token(caller: Caller, handoff_id: str, jti: str, holder: SigningKey = HOLDER) -> str:
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
        handoff_id=handoff_id,
        jti=jti,
    )
    return tokens.forge(header(), {**claims, "cnf": {"jkt": holder.kid}})


def get_task(caller: Caller, token: str, dpop: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    if dpop is not None:
        headers["DPoP"] = dpop
    return httpx.post(caller.base_url + JSONRPC_PATH, json=body, headers=headers, timeout=10)


def jsonrpc_url(caller: Caller) -> str:
    return caller.base_url + JSONRPC_PATH


def test_a_bound_token_with_its_holders_fresh_proof_is_accepted(member: Caller) -> None:
    token = bound_token(member, "handoff-1", "jti-ok")
    answer = get_task(member, token, proof(HOLDER, "POST", jsonrpc_url(member), token))
    assert answer.json()["error"]["code"] == -32001  # authenticated: the task is unknown
    # every request its own proof: a second one, freshly made, passes too
    again = get_task(member, token, proof(HOLDER, "POST", jsonrpc_url(member), token))
    assert again.json()["error"]["code"] == -32001


def test_a_send_under_a_bound_token_works_on_the_http_json_binding(member: Caller) -> None:
    token = bound_token(member, "handoff-rest", "jti-rest")
    url = f"{member.base_url}/a2a/rest/tasks/no-such-task"
    headers = {
        "A2A-Version": "1.0",
        "Authorization": f"Bearer {token}",
        "DPoP": proof(HOLDER, "GET", url, token),
    }
    answer = httpx.get(url, headers=headers, timeout=10)
    assert answer.status_code == 404, answer.text
    headers["DPoP"] = proof(HOLDER, "POST", url, token)  # the wrong method
    refused = httpx.get(url, headers=headers, timeout=10)
    assert refused.status_code == 401 and "holder_proof_mismatch" in refused.text


def _proof(case: str, caller: Caller, token: str) -> str | None:
    url = jsonrpc_url(caller)
    now = int(time.time())
    other_token = bound_token(caller, "handoff-1", "jti-other")
    claims: dict[str, Any] = {"jti": f"p-{case}", "htm": "POST", "htu": url, "iat": now}
    if case == "missing":
        return None
    if case == "thiefs_key":
        return proof(THIEF, "POST", url, token)
    if case == "another_url":
        return proof(HOLDER, "POST", caller.base_url + "/a2a/rest/message:send", token)
    if case == "another_method":
        return proof(HOLDER, "GET", url, token)
    if case == "another_token":
        return proof(HOLDER, "POST", url, other_token)
    if case == "stale":
        return proof(HOLDER, "POST", url, token, now=now - 120)
    if case == "future":
        return proof(HOLDER, "POST", url, token, now=now + 120)
    if case == "tampered":
        good = proof(HOLDER, "POST", url, token)
        return tokens.alter_signature(good)
    if case == "delegation_type":
        ath = proof(HOLDER, "POST", url, token).split(".")[1]
        return sign_jws_with_jwk(tokens_claims(ath), HOLDER, "delegation+jwt")
    if case == "private_jwk":
        head = {"typ": "dpop+jwt", "alg": "EdDSA", "jwk": {**HOLDER.public_jwk(), "d": "AAAA"}}
        return tokens.forge(head, claims, key=HOLDER.private_key)
    if case == "kid_header":
        head = {"typ": "dpop+jwt", "alg": "EdDSA", "jwk": HOLDER.public_jwk(), "kid": HOLDER.kid}
        return tokens.forge(head, claims, key=HOLDER.private_key)
    if case == "not_a_jws":
        return "not-a-proof"
    raise AssertionError(case)


def tokens_claims(payload_segment: str) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(b64url_decode(payload_segment))
    return decoded


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", "holder_proof_missing"),
        ("thiefs_key", "holder_key_mismatch"),
        ("another_url", "holder_proof_mismatch"),
        ("another_method", "holder_proof_mismatch"),
        ("another_token", "holder_proof_mismatch"),
        ("stale", "holder_proof_stale"),
        ("future", "holder_proof_stale"),
        ("tampered", "holder_proof_invalid"),
        ("delegation_type", "holder_proof_invalid"),
        ("private_jwk", "holder_proof_invalid"),
        ("kid_header", "holder_proof_invalid"),
        ("not_a_jws", "holder_proof_invalid"),
    ],
)
def test_a_stolen_or_misused_bound_token_is_refused(member: Caller, case: str, reason: str) -> None:
    token = bound_token(member, "handoff-1", "jti-1")
    status, refused = refusal_reason(get_task(member, token, _proof(case, member, token)))
    assert (status, refused) == (401, reason)


def test_a_replayed_proof_is_refused(member: Caller) -> None:
    token = bound_token(member, "handoff-1", "jti-replay")
    captured = proof(HOLDER, "POST", jsonrpc_url(member), token)
    assert get_task(member, token, captured).json()["error"]["code"] == -32001
    status, reason = refusal_reason(get_task(member, token, captured))
    assert (status, reason) == (401, "holder_proof_replayed")


def test_two_proofs_are_refused(member: Caller) -> None:
    token = bound_token(member, "handoff-1", "jti-two")
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    headers = [
        ("A2A-Version", "1.0"),
        ("Authorization", f"Bearer {token}"),
        ("DPoP", proof(HOLDER, "POST", jsonrpc_url(member), token)),
        ("DPoP", proof(HOLDER, "POST", jsonrpc_url(member), token)),
    ]
    answer = httpx.post(jsonrpc_url(member), json=body, headers=headers, timeout=10)
    assert refusal_reason(answer) == (401, "holder_proof_invalid")


def test_a_token_without_cnf_needs_no_proof(member: Caller) -> None:
    answer = get_task(member, member.token("handoff-1"), None)
    assert answer.json()["error"]["code"] == -32001


def test_the_proof_is_not_a_delegation_token(member: Caller) -> None:
    """A proof presented as the bearer token is refused as a token (wrong typ)."""
    token = bound_token(member, "handoff-1", "jti-typ")
    as_token = proof(HOLDER, "POST", jsonrpc_url(member), token)
    status, _reason = refusal_reason(get_task(member, as_token, None))
    assert status == 401
    assert COORDINATOR_KEY.kid != HOLDER.kid
