"""Each member behind its delegation check, attacked and used over real loopback HTTP.

Each attack is a SendMessage (or a lookup) carrying a forged or misused token; each must be
refused with its reason code at ``error.data[0].metadata.reason``, its HTTP status, and an
RFC 6750 challenge, before any task exists; and the same table is sent over every other
binding the member's card lists (HTTP+JSON, gRPC), refused there with the same reason and
status. Every test here runs against remote_risk and against the terms member built on
the kit (``tests/members.py``): the same table, the same reasons; a valid send carries
that member's own skill, scope and input.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from agent_cards.identity import THUMBPRINT_URI_PREFIX
from agent_cards.jwk import thumbprint_of
from agent_cards.keys import KeySet, SigningKey, TrustedKeys, b64url_decode
from agent_cards.signing import CardVerificationError, verify_card
from contracts.grant import Grant
from contracts.wire import AGENT_CARD_PATH
from coordinator.authority.tokens import mint_token
from member_kit.server.app import JSONRPC_PATH, JWKS_PATH
from tests import tokens
from tests.members import MEMBERS, MemberUnderTest
from tests.remote_risk.conftest import binding_of
from tests.remote_risk.test_bindings_same_checks import BINDINGS, VERIFY, served_interfaces
from tests.servers import free_port, running
from tests.tokens import (
    ATTACKER_KEY,
    COORDINATOR_KEY,
    COORDINATOR_SECOND_KEY,
    DROP,
    OTHER_ISSUER_KEY,
    P384_KEY,
    RSA_KEY,
    header,
)

ISSUER = "urn:a2a-federation:coordinator"
OTHER_ISSUER = "urn:a2a-federation:ops"
HANDOFF = "handoff-7"
_ids = itertools.count(1)
_jtis = itertools.count(1)


class Service:
    """A running, token-checking member and a raw JSON-RPC caller."""

    def __init__(self, base_url: str, app: Any, member: MemberUnderTest) -> None:
        self.base_url = base_url
        self.app = app
        self.member = member
        self.agent_id = app.state.settings.agent_id

    def claims(self, **changes: Any) -> dict[str, Any]:
        """Valid claims for this service, issued now, with a fresh jti."""
        base = tokens.delegation_claims(
            now=int(time.time()),
            issuer=ISSUER,
            audience=self.agent_id,
            scope=self.member.scope,
            handoff_id=HANDOFF,
            jti=f"jti-{next(_jtis)}",
        )
        return tokens.changed(base, **changes)

    def token(self, **changes: Any) -> str:
        return tokens.forge(header(), self.claims(**changes))

    def post(
        self, method: str, params: dict[str, Any], token: str | None, **headers: str
    ) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        sent = {"A2A-Version": "1.0", **headers}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return httpx.post(
            self.base_url + JSONRPC_PATH, json=body, headers=sent, timeout=10, verify=VERIFY
        )

    def send(self, token: str | None, **metadata: Any) -> httpx.Response:
        return self.post("SendMessage", self.send_params(**metadata), token)

    def send_params(self, **metadata: Any) -> dict[str, Any]:
        """A send of its own, of this member's skill and a valid input: a fresh idempotency
        key, so that no send is taken for a retry."""
        key = f"k-{next(_ids)}"
        skill = self.member.skill
        meta = {"handoffId": HANDOFF, "attempt": 1, "skillId": skill, "idempotencyKey": key}
        message: dict[str, Any] = {
            "messageId": f"m-{next(_ids)}",
            "role": "ROLE_USER",
            "parts": [{"data": self.member.valid_input(), "mediaType": "application/json"}],
            "metadata": tokens.changed(meta, **metadata),
        }
        return {"message": message}


@pytest.fixture(scope="module", params=sorted(MEMBERS))
def service(request: pytest.FixtureRequest) -> Iterator[Service]:
    """Each member in turn, trusting two issuers (two keys of the coordinator's)."""
    member = MEMBERS[request.param]
    port = free_port()
    app = member.create_app(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={
            ISSUER: TrustedKeys(
                [COORDINATOR_KEY.verification_key(), COORDINATOR_SECOND_KEY.verification_key()]
            ),
            OTHER_ISSUER: TrustedKeys([OTHER_ISSUER_KEY.verification_key()]),
        },
        signing_keys=KeySet(active=SigningKey.generate()),
        grpc_port=free_port(),
    )
    with running(app, port=port) as url:
        yield Service(url, app, member)


def refusal(response: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    """The HTTP status, the stable reason code and the JSON-RPC error of a refusal."""
    error = response.json()["error"]
    (info,) = error["data"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    return response.status_code, info["metadata"]["reason"], error


# --- the attack table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    name: str
    token: Callable[[Service], str | None]
    reason: str
    status: int
    metadata: dict[str, Any] = field(default_factory=dict)
    replay_first: bool = False


def _budget(s: Service, **budget: int) -> str:
    return tokens.forge(header(), tokens.with_budget(s.claims(), **budget))


def _other_handoff(s: Service) -> str:
    return tokens.forge(header(), tokens.with_handoff(s.claims(), id="handoff-8"))


def _now() -> int:
    return int(time.time())


ATTACKS = [
    Attack("no_token", lambda s: None, "token_missing", 401),
    Attack("alg_none", lambda s: tokens.forge(header(alg="none"), s.claims(), alg="none"),
           "algorithm_not_allowed", 401),
    Attack("alg_None", lambda s: tokens.forge(header(alg="None"), s.claims(), alg="none"),
           "algorithm_not_allowed", 401),
    Attack("alg_NONE", lambda s: tokens.forge(header(alg="NONE"), s.claims(), alg="none"),
           "algorithm_not_allowed", 401),
    Attack("alg_nOnE", lambda s: tokens.forge(header(alg="nOnE"), s.claims(), alg="none"),
           "algorithm_not_allowed", 401),
    Attack("hs256_keyed_with_public_key",
           lambda s: tokens.forge(header(alg="HS256"), s.claims(), key=tokens.public_key_bytes()),
           "algorithm_not_allowed", 401),
    Attack("rs256_outside_allow_list",
           lambda s: tokens.forge(header(alg="RS256"), s.claims(), key=RSA_KEY),
           "algorithm_not_allowed", 401),
    Attack("es384_outside_allow_list",
           lambda s: tokens.forge(header(alg="ES384"), s.claims(), key=P384_KEY),
           "algorithm_not_allowed", 401),
    Attack("wrong_kid_of_same_issuer",
           lambda s: tokens.forge(header(COORDINATOR_SECOND_KEY), s.claims()),
           "signature_invalid", 401),
    Attack("unknown_kid",
           lambda s: tokens.forge(header(ATTACKER_KEY), s.claims(), key=ATTACKER_KEY.private_key),
           "kid_unknown", 401),
    Attack("kid_not_a_string", lambda s: tokens.forge(header(kid=7), s.claims()),
           "kid_invalid", 401),
    Attack("jku_header",
           lambda s: tokens.forge(header(jku="https://evil.example/jwks"), s.claims()),
           "header_not_allowed", 401),
    Attack("x5u_header", lambda s: tokens.forge(header(x5u="https://evil.example/c"), s.claims()),
           "header_not_allowed", 401),
    Attack("jwk_header",
           lambda s: tokens.forge(header(jwk=ATTACKER_KEY.public_jwk()), s.claims(),
                                  key=ATTACKER_KEY.private_key),
           "header_not_allowed", 401),
    Attack("crit_header", lambda s: tokens.forge(header(crit=["exp"]), s.claims()),
           "header_not_allowed", 401),
    Attack("typ_wrong", lambda s: tokens.forge(header(typ="JWT"), s.claims()),
           "type_mismatch", 401),
    Attack("typ_missing", lambda s: tokens.forge(header(typ=DROP), s.claims()),
           "type_mismatch", 401),
    Attack("signature_stripped", lambda s: s.token().rsplit(".", 1)[0] + ".",
           "signature_invalid", 401),
    Attack("signature_altered", lambda s: tokens.alter_signature(s.token()),
           "signature_invalid", 401),
    Attack("payload_swapped",
           lambda s: tokens.swap_payload(s.token(), s.claims(scope=s.member.scope + " admin")),
           "signature_invalid", 401),
    Attack("signature_padded", lambda s: s.token() + "==", "token_malformed", 401),
    Attack("expired",
           lambda s: s.token(iat=_now() - 300, nbf=_now() - 300, exp=_now() - 120),
           "token_expired", 401),
    Attack("nbf_in_future", lambda s: s.token(nbf=_now() + 240), "token_not_yet_valid", 401),
    Attack("iat_in_future", lambda s: s.token(iat=_now() + 240), "issued_in_future", 401),
    Attack("lifetime_too_long", lambda s: s.token(exp=_now() + 86_400), "lifetime_too_long", 401),
    Attack("exp_as_string", lambda s: s.token(exp=str(_now() + 200)), "claim_type_invalid", 401),
    Attack("exp_missing", lambda s: s.token(exp=DROP), "claim_missing", 401),
    Attack("aud_missing", lambda s: s.token(aud=DROP), "claim_missing", 401),
    Attack("jti_missing", lambda s: s.token(jti=DROP), "claim_missing", 401),
    Attack("sub_missing", lambda s: s.token(sub=DROP), "claim_missing", 401),
    Attack("aud_wrong", lambda s: s.token(aud="http://127.0.0.1:1/a2a/jsonrpc"),
           "audience_mismatch", 401),
    Attack("aud_base_url_only", lambda s: s.token(aud=s.base_url), "audience_mismatch", 401),
    Attack("aud_with_extra_value", lambda s: s.token(aud=[s.agent_id, "privacy"]),
           "audience_mismatch", 401),
    Attack("iss_wrong", lambda s: s.token(iss="urn:evil:coordinator"), "issuer_unknown", 401),
    Attack("key_of_another_trusted_issuer",
           lambda s: tokens.forge(header(OTHER_ISSUER_KEY), s.claims(),
                                  key=OTHER_ISSUER_KEY.private_key),
           "kid_unknown", 401),
    Attack("duplicate_json_member",
           lambda s: tokens.forge(header(), tokens.duplicate_member(s.claims(), "scope", "admin")),
           "duplicate_claim", 401),
    Attack("act_chain_too_deep", lambda s: s.token(act=tokens.act_chain(5)),
           "act_chain_too_deep", 403),
    Attack("oversized", lambda s: s.token(pad="x" * 9000), "token_too_large", 401),
    Attack("replayed_jti", lambda s: s.token(jti=f"jti-replayed-{next(_jtis)}"), "replayed_jti",
           401, replay_first=True),
    Attack("token_of_another_handoff", _other_handoff, "handoff_mismatch", 403),
    Attack("message_names_no_handoff", lambda s: s.token(), "handoff_mismatch", 403,
           metadata={"handoffId": DROP}),
    Attack("message_names_another_attempt", lambda s: s.token(), "handoff_mismatch", 403,
           metadata={"attempt": 2}),
    Attack("scope_too_narrow", lambda s: s.token(scope=s.member.narrow_scope),
           "scope_insufficient", 403),
    Attack("effects_above_zero", lambda s: _budget(s, effects=1), "effects_not_allowed", 403),
]  # fmt: skip


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_refused_over_http(service: Service, attack: Attack) -> None:
    """Each forged or misused token is refused with its reason code, status and challenge:
    the table's, on every member."""
    token = attack.token(service)
    if attack.replay_first:
        assert service.send(token).status_code == 200
    tasks_before = len(service.app.state.task_store)
    response = service.send(token, **attack.metadata)
    status, reason, error = refusal(response)
    assert (status, reason) == (attack.status, attack.reason)
    assert error["code"] == (-32090 if status == 401 else -32091)
    challenge = response.headers["www-authenticate"]
    expected = "invalid_token" if status == 401 else "insufficient_scope"
    assert challenge == f'Bearer error="{expected}", error_description="{reason}"'
    assert len(service.app.state.task_store) == tasks_before
    if token:
        assert_not_echoed(token, response.text)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_refused_alike_on_every_binding(service: Service, attack: Attack) -> None:
    """The same forged or misused token, sent over each binding the card lists, is refused
    with the table's reason and status (gRPC's UNAUTHENTICATED / PERMISSION_DENIED as
    401 / 403) on each, before any task exists."""
    listed = served_interfaces(service.base_url)
    assert set(listed) == set(BINDINGS)
    outcomes = {name: refused_over(service, attack, name, url) for name, url in listed.items()}
    assert set(outcomes.values()) == {(attack.status, attack.reason)}, outcomes


def refused_over(service: Service, attack: Attack, binding: str, url: str) -> tuple[int, str]:
    """``attack`` over ``binding`` at ``url``: its status and reason; no task made."""
    token = attack.token(service)
    if attack.replay_first:
        assert service.send(token).status_code == 200
    tasks_before = len(service.app.state.task_store)
    outcome = BINDINGS[binding](url, service.send_params(**attack.metadata), token)
    assert len(service.app.state.task_store) == tasks_before, binding
    return outcome


def test_attack_table_is_large_enough() -> None:
    """The HTTP table holds at least thirty distinct attacks with unique names."""
    names = [attack.name for attack in ATTACKS]
    assert len(names) >= 30 and len(set(names)) == len(names)


def assert_not_echoed(token: str, text: str) -> None:
    for part in token.split("."):
        if len(part) >= 8:
            assert part not in text


# --- refusal shape -----------------------------------------------------------------------


def test_no_token_is_401_with_a_jsonrpc_error_body(service: Service) -> None:
    """Without a token the answer is 401, a Bearer challenge and a JSON-RPC error naming the
    reason; its id is null, since the token is checked before the body is read."""
    body = {"jsonrpc": "2.0", "id": "req-1", "method": "GetTask", "params": {"id": "t"}}
    response = httpx.post(
        service.base_url + JSONRPC_PATH, json=body, headers={"A2A-Version": "1.0"}, timeout=10
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert response.headers["content-type"] == "application/json"
    decoded = response.json()
    assert decoded["jsonrpc"] == "2.0" and decoded["id"] is None
    assert decoded["error"]["code"] == -32090
    (info,) = decoded["error"]["data"]
    assert info["reason"] == "UNAUTHENTICATED"
    assert info["metadata"] == {"reason": "token_missing"}


@pytest.mark.parametrize(
    "value", ["Basic dXNlcjpwYXNz", "Bearer", "Token abc.def.ghi", "token-only"]
)
def test_other_authorization_schemes_count_as_no_token(service: Service, value: str) -> None:
    """Basic credentials, an empty Bearer or a bare value are all token_missing."""
    response = httpx.post(
        service.base_url + JSONRPC_PATH,
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        headers={"A2A-Version": "1.0", "Authorization": value},
        timeout=10,
    )
    assert refusal(response)[:2] == (401, "token_missing")


def test_two_authorization_headers_are_refused(service: Service) -> None:
    """Two Authorization headers are token_malformed, whichever of them is valid."""
    headers = [
        ("A2A-Version", "1.0"),
        ("Authorization", f"Bearer {service.token()}"),
        ("Authorization", f"Bearer {service.token()}"),
    ]
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    response = httpx.post(service.base_url + JSONRPC_PATH, json=body, headers=headers, timeout=10)
    assert refusal(response)[:2] == (401, "token_malformed")


def test_tenant_in_the_request_must_match_the_token(service: Service) -> None:
    """A request naming another tenant than its token is refused with 403 tenant_mismatch."""
    params = {**service.send_params(), "tenant": "tenant-b"}
    response = service.post("SendMessage", params, service.token())
    assert refusal(response)[:2] == (403, "tenant_mismatch")


def test_unknown_skill_is_invalid_params(service: Service) -> None:
    """A skillId this agent does not offer is -32602, and no task is created."""
    response = service.send(service.token(), skillId="approve-refunds")
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


# --- the happy path and owner scoping --------------------------------------------------------


def test_valid_token_completes_and_the_task_carries_the_handoff(service: Service) -> None:
    """A valid token runs the skill to COMPLETED; the task echoes handoffId and attempt, and
    GetTask with the same token returns it."""
    token = service.token()
    response = service.send(token)
    assert response.status_code == 200, response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert binding_of(task) == {"handoffId": HANDOFF, "attempt": 1}
    fetched = service.post("GetTask", {"id": task["id"]}, token)
    assert fetched.json()["result"]["id"] == task["id"]


def test_a_minted_token_is_accepted(service: Service) -> None:
    """A token made by the coordinator's minter for this agent id is accepted."""
    grant = Grant.model_validate(service.claims())
    response = service.send(mint_token(grant, COORDINATOR_KEY))
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_another_principal_gets_task_not_found(service: Service) -> None:
    """A task is invisible to another subject or another tenant, even with a valid token:
    GetTask and CancelTask answer TaskNotFound and ListTasks omits it."""
    created = service.send(service.token()).json()["result"]["task"]
    for other in (service.token(sub="mallory"), service.token(tenant="tenant-b")):
        for method in ("GetTask", "CancelTask"):
            answer = service.post(method, {"id": created["id"]}, other)
            assert answer.status_code == 200
            assert answer.json()["error"]["code"] == -32001
        listed = service.post("ListTasks", {}, other).json()["result"]["tasks"]
        assert created["id"] not in [task["id"] for task in listed]


def test_same_principal_reads_its_task_with_a_later_token(service: Service) -> None:
    """The owner is the principal (iss, sub, tenant), so a later token of that principal
    sees the task."""
    created = service.send(service.token()).json()["result"]["task"]
    fetched = service.post("GetTask", {"id": created["id"]}, service.token())
    assert fetched.json()["result"]["id"] == created["id"]


def test_one_token_creates_one_task_but_may_read_it_again(service: Service) -> None:
    """Reusing a token for GetTask works; a second task-creating SendMessage is replayed_jti."""
    token = service.token()
    created = service.send(token).json()["result"]["task"]
    for _ in range(2):
        assert service.post("GetTask", {"id": created["id"]}, token).status_code == 200
    assert refusal(service.send(token))[:2] == (401, "replayed_jti")


def test_lookup_with_an_expired_token_is_refused(service: Service) -> None:
    """GetTask needs a valid token too; an expired one is 401 token_expired."""
    expired = service.token(iat=_now() - 300, nbf=_now() - 300, exp=_now() - 120)
    response = service.post("GetTask", {"id": "any"}, expired)
    assert refusal(response)[:2] == (401, "token_expired")


# --- the decision trace ----------------------------------------------------------------------


def test_every_decision_is_recorded_without_the_token(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """Allowed and denied decisions land in app.state.decisions and the log with the jti and
    claims digest, and no part of the token."""
    good, bad = service.token(), service.token(scope=service.member.narrow_scope)
    with caplog.at_level("INFO", logger="member_kit.server.auth"):
        service.send(good)
        service.send(bad)
    recent = list(service.app.state.decisions)[-2:]
    assert [(d.allowed, d.reason) for d in recent] == [
        (True, "allowed"),
        (False, "scope_insufficient"),
    ]
    for decision, token in zip(recent, (good, bad), strict=True):
        claims = json.loads(b64url_decode(token.split(".")[1]))
        assert decision.jti == claims["jti"]
        assert decision.claims_digest is not None
        assert decision.claims_digest.startswith("sha256:")
        assert decision.method == "SendMessage"
        assert_not_echoed(token, json.dumps(decision.as_dict()))
        assert_not_echoed(token, caplog.text)
    assert "jti=" in caplog.text and recent[1].jti is not None and recent[1].jti in caplog.text


# --- card and keys ---------------------------------------------------------------------------


def test_card_is_signed_and_verifies_against_the_served_jwks(service: Service) -> None:
    """The served card carries a signature by the service's key, verifiable with its JWKS."""
    card = httpx.get(service.base_url + AGENT_CARD_PATH, timeout=10).json()
    jwks = httpx.get(service.base_url + JWKS_PATH, timeout=10)
    assert jwks.status_code == 200 and jwks.headers["content-type"] == "application/json"
    keys = TrustedKeys.from_json(jwks.content)
    active = service.app.state.signing_keys.active
    assert verify_card(card, keys).kid == active.kid
    assert card["supportedInterfaces"][0]["url"] == service.app.state.settings.jsonrpc_url
    # its identity, what tokens for it name: its card key's RFC 9278 thumbprint URI
    assert service.agent_id == THUMBPRINT_URI_PREFIX + thumbprint_of(
        active.private_key.public_key()
    )


def test_jwks_holds_public_keys_only(service: Service) -> None:
    """The JWK Set lists the active key's public members and never a private one."""
    document = httpx.get(service.base_url + JWKS_PATH, timeout=10).json()
    (jwk,) = document["keys"]
    assert jwk["kid"] == service.app.state.signing_keys.active.kid
    assert jwk["use"] == "sig" and "d" not in jwk


def test_card_advertises_the_delegation_scheme(service: Service) -> None:
    """The card names the Bearer JWT scheme and the scope the skill requires."""
    card = httpx.get(service.base_url + AGENT_CARD_PATH, timeout=10).json()
    assert card["securitySchemes"]["delegation"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    (skill,) = card["skills"]
    scopes = [service.member.scope]
    assert skill["id"] == service.member.skill
    assert skill["securityRequirements"] == [{"schemes": {"delegation": {"list": scopes}}}]


def test_a_tampered_card_does_not_verify(service: Service) -> None:
    """Changing the served card's interface URL breaks its signature."""
    card = httpx.get(service.base_url + AGENT_CARD_PATH, timeout=10).json()
    keys = TrustedKeys.from_json(httpx.get(service.base_url + JWKS_PATH, timeout=10).content)
    card["supportedInterfaces"][0]["url"] = "http://127.0.0.1:1/a2a/jsonrpc"
    with pytest.raises(CardVerificationError) as refused:
        verify_card(card, keys)
    assert refused.value.reason == "card_signature_invalid"
