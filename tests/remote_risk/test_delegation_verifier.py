"""The delegation verifier against a table of attacks, each refused with its own reason code.

The tokens are forged by hand with the helpers in :mod:`tests.tokens`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_cards.keys import SigningKey, TrustedKeys, b64url_decode, b64url_encode
from contracts.grant import Grant
from coordinator.authority.tokens import mint_token
from member_kit.trust.replay import InMemoryReplayGuard
from member_kit.trust.verifier import (
    REASONS,
    DelegationDenied,
    DelegationVerifier,
    DenialReason,
    VerifiedDelegation,
)
from tests import tokens
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
from tests.tokens import act_chain as _chain
from tests.tokens import alter_signature as _alter_signature
from tests.tokens import duplicate_member as _duplicate_member
from tests.tokens import public_key_bytes as _public_bytes
from tests.tokens import swap_payload as _swap_payload

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
AUDIENCE = "remote-risk"
ISSUER = "coordinator"
OTHER_ISSUER = "ops-coordinator"

R = DenialReason


def _clock() -> datetime:
    return NOW


def make_verifier(**overrides: Any) -> DelegationVerifier:
    trusted = {
        ISSUER: TrustedKeys(
            [COORDINATOR_KEY.verification_key(), COORDINATOR_SECOND_KEY.verification_key()]
        ),
        OTHER_ISSUER: TrustedKeys([OTHER_ISSUER_KEY.verification_key()]),
    }
    options: dict[str, Any] = {
        "clock": _clock,
        "max_lifetime": timedelta(minutes=10),
        "leeway": timedelta(seconds=30),
        "max_act_depth": 4,
        "max_token_bytes": 8192,
        "replay_guard": InMemoryReplayGuard(_clock),
    }
    return DelegationVerifier(trusted, AUDIENCE, **{**options, **overrides})


REQUEST: dict[str, Any] = {
    "skill_id": "assess",
    "required_scopes": ["risk:read"],
    "handoff_id": "handoff-7",
    "read_only": True,
    "tenant": "tenant-a",
    "creates_task": True,
}


def claims(**changes: Any) -> dict[str, Any]:
    """Valid child claims; a change to ``DROP`` removes the claim."""
    base = tokens.delegation_claims(now=T, issuer=ISSUER, audience=AUDIENCE, scope="risk:read")
    return tokens.changed(base, **changes)


def forge(
    head: dict[str, Any] | str | None = None,
    payload: dict[str, Any] | str | None = None,
    *,
    key: Any = None,
    alg: str | None = None,
) -> str:
    """A compact JWS built by hand: any header, any payload, signed with any key."""
    head = header() if head is None else head
    payload = claims() if payload is None else payload
    return tokens.forge(head, payload, key=key, alg=alg)


@dataclass(frozen=True)
class Attack:
    name: str
    token: Callable[[], str | None]
    reason: DenialReason
    request: dict[str, Any] = field(default_factory=dict)
    replay_first: bool = False


ATTACKS = [
    # --- raw shape and size
    Attack("token_absent", lambda: None, R.TOKEN_MISSING),
    Attack("token_empty", lambda: "", R.TOKEN_MISSING),
    Attack("oversized", lambda: forge(payload=claims(pad="x" * 9000)), R.TOKEN_TOO_LARGE),
    Attack("two_segments", lambda: ".".join(forge().split(".")[:2]), R.TOKEN_MALFORMED),
    Attack("jwe_shaped", lambda: forge() + ".AAAA.BBBB", R.TOKEN_MALFORMED),
    Attack("signature_padding", lambda: forge() + "==", R.TOKEN_MALFORMED),
    Attack("surrounding_space", lambda: f" {forge()} ", R.TOKEN_MALFORMED),
    Attack("header_json_array", lambda: forge(head='["alg"]'), R.TOKEN_MALFORMED),
    Attack("payload_not_json", lambda: forge(payload="not json"), R.TOKEN_MALFORMED),
    # --- algorithm
    Attack("alg_none", lambda: forge(header(alg="none"), alg="none"), R.ALGORITHM_NOT_ALLOWED),
    Attack("alg_None", lambda: forge(header(alg="None"), alg="none"), R.ALGORITHM_NOT_ALLOWED),
    Attack("alg_NONE", lambda: forge(header(alg="NONE"), alg="none"), R.ALGORITHM_NOT_ALLOWED),
    Attack("alg_nOnE", lambda: forge(header(alg="nOnE"), alg="none"), R.ALGORITHM_NOT_ALLOWED),
    Attack(
        "alg_none_with_signature",
        lambda: forge(header(alg="none"), alg="EdDSA"),
        R.ALGORITHM_NOT_ALLOWED,
    ),
    Attack(
        "hs256_keyed_with_public_key_bytes",
        lambda: forge(header(alg="HS256"), key=_public_bytes()),
        R.ALGORITHM_NOT_ALLOWED,
    ),
    Attack(
        "hs256_keyed_with_public_jwk",
        lambda: forge(header(alg="HS256"), key=json.dumps(COORDINATOR_KEY.public_jwk()).encode()),
        R.ALGORITHM_NOT_ALLOWED,
    ),
    Attack("rs256", lambda: forge(header(alg="RS256"), key=RSA_KEY), R.ALGORITHM_NOT_ALLOWED),
    Attack("es384", lambda: forge(header(alg="ES384"), key=P384_KEY), R.ALGORITHM_NOT_ALLOWED),
    Attack("alg_missing", lambda: forge(header(alg=DROP)), R.ALGORITHM_NOT_ALLOWED),
    Attack(
        "es256_header_on_an_eddsa_key",
        lambda: forge(header(alg="ES256"), key=OTHER_ISSUER_KEY.private_key),
        R.ALGORITHM_NOT_ALLOWED,
    ),
    # --- header members and typ
    Attack("jku", lambda: forge(header(jku="https://evil.example/jwks")), R.HEADER_NOT_ALLOWED),
    Attack("x5u", lambda: forge(header(x5u="file:///etc/passwd")), R.HEADER_NOT_ALLOWED),
    Attack(
        "jwk_embedded",
        lambda: forge(header(jwk=ATTACKER_KEY.public_jwk()), key=ATTACKER_KEY.private_key),
        R.HEADER_NOT_ALLOWED,
    ),
    Attack("x5c", lambda: forge(header(x5c=["MIIB"])), R.HEADER_NOT_ALLOWED),
    Attack("crit", lambda: forge(header(crit=["urn:x:delegation"])), R.HEADER_NOT_ALLOWED),
    Attack("cty_nested_jwt", lambda: forge(header(cty="JWT")), R.HEADER_NOT_ALLOWED),
    Attack("typ_jwt", lambda: forge(header(typ="JWT")), R.TYPE_MISMATCH),
    Attack("typ_access_token", lambda: forge(header(typ="at+jwt")), R.TYPE_MISMATCH),
    Attack("typ_other_case", lambda: forge(header(typ="Delegation+JWT")), R.TYPE_MISMATCH),
    Attack("typ_missing", lambda: forge(header(typ=DROP)), R.TYPE_MISMATCH),
    # --- kid and issuer
    Attack("kid_not_string", lambda: forge(header(kid=7)), R.KID_INVALID),
    Attack("kid_object", lambda: forge(header(kid={"$ne": 1})), R.KID_INVALID),
    Attack("kid_missing", lambda: forge(header(kid=DROP)), R.KID_INVALID),
    Attack("kid_path_traversal", lambda: forge(header(kid="../../dev/null")), R.KID_INVALID),
    Attack(
        "kid_unknown",
        lambda: forge(header(ATTACKER_KEY), key=ATTACKER_KEY.private_key),
        R.KID_UNKNOWN,
    ),
    Attack(
        "kid_of_another_trusted_issuer",
        lambda: forge(header(OTHER_ISSUER_KEY), key=OTHER_ISSUER_KEY.private_key),
        R.KID_UNKNOWN,
    ),
    Attack(
        "claims_other_issuer_with_our_kid",
        lambda: forge(payload=claims(iss=OTHER_ISSUER)),
        R.KID_UNKNOWN,
    ),
    Attack(
        "issuer_unknown", lambda: forge(payload=claims(iss="evil-coordinator")), R.ISSUER_UNKNOWN
    ),
    Attack("issuer_missing", lambda: forge(payload=claims(iss=DROP)), R.CLAIM_MISSING),
    Attack("issuer_not_string", lambda: forge(payload=claims(iss=[ISSUER])), R.CLAIM_TYPE_INVALID),
    # --- signature
    Attack("signature_stripped", lambda: forge().rsplit(".", 1)[0] + ".", R.SIGNATURE_INVALID),
    Attack("signature_altered", lambda: _alter_signature(forge()), R.SIGNATURE_INVALID),
    Attack(
        "payload_swapped",
        lambda: _swap_payload(forge(), claims(scope="risk:read risk:write")),
        R.SIGNATURE_INVALID,
    ),
    Attack(
        "attacker_key_with_legit_kid",
        lambda: forge(key=ATTACKER_KEY.private_key),
        R.SIGNATURE_INVALID,
    ),
    Attack(
        "wrong_kid_of_same_issuer",
        lambda: forge(header(COORDINATOR_SECOND_KEY)),
        R.SIGNATURE_INVALID,
    ),
    # --- duplicates
    Attack(
        "duplicate_payload_member",
        lambda: forge(payload=_duplicate_member(claims(), "scope", "admin")),
        R.DUPLICATE_CLAIM,
    ),
    Attack(
        "duplicate_header_member",
        lambda: forge(head='{"alg":"none",' + json.dumps(header())[1:], alg="EdDSA"),
        R.DUPLICATE_CLAIM,
    ),
    # --- claim presence and types
    Attack("exp_missing", lambda: forge(payload=claims(exp=DROP)), R.CLAIM_MISSING),
    Attack("aud_missing", lambda: forge(payload=claims(aud=DROP)), R.CLAIM_MISSING),
    Attack("jti_missing", lambda: forge(payload=claims(jti=DROP)), R.CLAIM_MISSING),
    Attack("sub_missing", lambda: forge(payload=claims(sub=DROP)), R.CLAIM_MISSING),
    Attack("act_missing", lambda: forge(payload=claims(act=DROP)), R.CLAIM_MISSING),
    Attack("tenant_missing", lambda: forge(payload=claims(tenant=DROP)), R.CLAIM_MISSING),
    Attack("handoff_missing", lambda: forge(payload=claims(handoff=DROP)), R.CLAIM_MISSING),
    Attack("exp_string", lambda: forge(payload=claims(exp=str(T + 290))), R.CLAIM_TYPE_INVALID),
    Attack("exp_bool", lambda: forge(payload=claims(exp=True)), R.CLAIM_TYPE_INVALID),
    Attack("exp_float", lambda: forge(payload=claims(exp=T + 290.5)), R.CLAIM_TYPE_INVALID),
    Attack("iat_null", lambda: forge(payload=claims(iat=None)), R.CLAIM_TYPE_INVALID),
    Attack("sub_number", lambda: forge(payload=claims(sub=42)), R.CLAIM_TYPE_INVALID),
    Attack("jti_number", lambda: forge(payload=claims(jti=42)), R.CLAIM_TYPE_INVALID),
    Attack(
        "tenant_fullwidth",
        lambda: forge(payload=claims(tenant="\uff54-\uff41\uff43\uff4d\uff45")),
        R.CLAIM_TYPE_INVALID,
    ),
    Attack("unknown_claim", lambda: forge(payload=claims(admin=True)), R.CLAIM_TYPE_INVALID),
    # --- time
    Attack(
        "expired",
        lambda: forge(payload=claims(iat=T - 300, nbf=T - 300, exp=T - 31)),
        R.TOKEN_EXPIRED,
    ),
    Attack("nbf_in_future", lambda: forge(payload=claims(nbf=T + 120)), R.TOKEN_NOT_YET_VALID),
    Attack("iat_in_future", lambda: forge(payload=claims(iat=T + 120)), R.ISSUED_IN_FUTURE),
    Attack(
        "lifetime_too_long",
        lambda: forge(payload=claims(exp=T + 86_400)),
        R.LIFETIME_TOO_LONG,
    ),
    Attack(
        "exp_far_future",
        lambda: forge(payload=claims(exp=10**15)),
        R.LIFETIME_TOO_LONG,
    ),
    # --- audience
    Attack("aud_wrong", lambda: forge(payload=claims(aud="privacy")), R.AUDIENCE_MISMATCH),
    Attack(
        "aud_list_with_extra",
        lambda: forge(payload=claims(aud=[AUDIENCE, "privacy"])),
        R.AUDIENCE_MISMATCH,
    ),
    Attack(
        "aud_list_only_ours", lambda: forge(payload=claims(aud=[AUDIENCE])), R.AUDIENCE_MISMATCH
    ),
    Attack("aud_other_case", lambda: forge(payload=claims(aud="Remote-Risk")), R.AUDIENCE_MISMATCH),
    # --- act, binding and authority
    Attack(
        "act_chain_too_deep", lambda: forge(payload=claims(act=_chain(5))), R.ACT_CHAIN_TOO_DEEP
    ),
    Attack(
        "act_level_not_object",
        lambda: forge(payload=claims(act={"sub": "a", "act": "b"})),
        R.CLAIM_TYPE_INVALID,
    ),
    Attack("tenant_switched", lambda: forge(payload=claims(tenant="tenant-b")), R.TENANT_MISMATCH),
    Attack(
        "scope_too_narrow", lambda: forge(payload=claims(scope="ops:read")), R.SCOPE_INSUFFICIENT
    ),
    Attack(
        "scope_missing_one_required",
        lambda: forge(),
        R.SCOPE_INSUFFICIENT,
        request={"required_scopes": ["risk:read", "risk:write"]},
    ),
    Attack(
        "effects_above_zero",
        lambda: forge(
            payload=claims(
                handoff={
                    **claims()["handoff"],
                    "budget": {"actions": 2, "context_units": 40, "effects": 1},
                }
            )
        ),
        R.EFFECTS_NOT_ALLOWED,
    ),
    Attack(
        "another_handoff",
        lambda: forge(payload=claims(handoff={**claims()["handoff"], "id": "handoff-8"})),
        R.HANDOFF_MISMATCH,
    ),
    Attack("replayed_jti", lambda: forge(), R.REPLAYED_JTI, replay_first=True),
]


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_is_refused_with_its_reason(attack: Attack) -> None:
    """Each crafted token is refused with the reason code and HTTP status the table gives."""
    verifier = make_verifier()
    request = {**REQUEST, **attack.request}
    token = attack.token()
    if attack.replay_first:
        verifier.verify(token, **request)
    with pytest.raises(DelegationDenied) as denied:
        verifier.verify(token, **request)
    assert denied.value.reason is attack.reason
    assert denied.value.http_status == REASONS[attack.reason].http_status


def test_attack_table_is_large_enough() -> None:
    """The table holds at least thirty distinct attacks with unique names."""
    names = [attack.name for attack in ATTACKS]
    assert len(names) >= 30 and len(set(names)) == len(names)


def test_http_status_splits_bad_tokens_from_forbidden_requests() -> None:
    """Authorization failures of a sound token are 403; every other denial is 401, bar one 503."""
    forbidden = {
        R.ACT_CHAIN_TOO_DEEP,
        R.TENANT_MISMATCH,
        R.SCOPE_INSUFFICIENT,
        R.EFFECTS_NOT_ALLOWED,
        R.HANDOFF_MISMATCH,
        R.CONTINUATION_MISMATCH,
        R.MODEL_BUDGET_UNBOUNDED,
        R.REQUEST_DIGEST_MISMATCH,
        R.REQUEST_DIGEST_MISSING,
    }
    assert set(REASONS) == set(DenialReason)
    for reason, info in REASONS.items():
        expected = (
            403 if reason in forbidden else 503 if reason is R.REPLAY_GUARD_UNAVAILABLE else 401
        )
        assert info.http_status == expected, reason


@pytest.mark.parametrize("key", [COORDINATOR_KEY, COORDINATOR_SECOND_KEY])
def test_minted_token_verifies(key: SigningKey) -> None:
    """A token minted by the coordinator with any pinned key of its issuer is accepted."""
    token = mint_token(Grant.model_validate(claims()), key)
    verified = make_verifier().verify(token, **REQUEST)
    assert isinstance(verified, VerifiedDelegation)
    assert verified.kid == key.kid and verified.grant.handoff.id == "handoff-7"
    assert verified.current_actor == AUDIENCE
    assert verified.claims_digest.startswith("sha256:")


def test_es256_issuer_is_accepted_with_its_own_key() -> None:
    """The other trusted issuer's ES256 key verifies tokens that name that issuer."""
    token = mint_token(Grant.model_validate(claims(iss=OTHER_ISSUER)), OTHER_ISSUER_KEY)
    assert make_verifier().verify(token, **REQUEST).alg == "ES256"


def test_minted_header_is_exactly_alg_typ_kid() -> None:
    """The minter writes a header with alg, typ delegation+jwt and kid, and nothing else."""
    token = mint_token(Grant.model_validate(claims()), COORDINATOR_KEY)
    raw = token.split(".")[0]
    decoded = json.loads(b64url_decode(raw))
    assert decoded == {"alg": "EdDSA", "kid": COORDINATOR_KEY.kid, "typ": "delegation+jwt"}


def test_minting_refuses_incomplete_claims() -> None:
    """The minter refuses raw claims that are not a complete grant."""
    with pytest.raises(ValueError):
        mint_token(claims(tenant=DROP), COORDINATOR_KEY)


def test_expiry_within_leeway_is_accepted() -> None:
    """A token that expired ten seconds ago still passes with a thirty-second leeway."""
    token = forge(payload=claims(iat=T - 300, nbf=T - 300, exp=T - 10))
    assert make_verifier().verify(token, **REQUEST).grant.exp == T - 10


def test_expiry_exactly_at_the_leeway_edge_is_refused() -> None:
    """exp equal to now minus the leeway is already expired."""
    token = forge(payload=claims(iat=T - 300, nbf=T - 300, exp=T - 30))
    with pytest.raises(DelegationDenied) as denied:
        make_verifier().verify(token, **REQUEST)
    assert denied.value.reason is R.TOKEN_EXPIRED


def test_checks_that_the_request_does_not_ask_for_are_skipped() -> None:
    """Without a handoff id or tenant in the request, and for a skill with effects, those pass."""
    token = forge(
        payload=claims(
            tenant="tenant-b",
            handoff={
                **claims()["handoff"],
                "id": "handoff-8",
                "budget": {"actions": 1, "context_units": 1, "effects": 1},
            },
        )
    )
    request = {**REQUEST, "handoff_id": None, "tenant": None, "read_only": False}
    assert make_verifier().verify(token, **request).grant.tenant == "tenant-b"


def test_without_task_creation_a_token_may_be_presented_again() -> None:
    """Lookups that create no task can reuse the token; only task creation claims the jti."""
    verifier = make_verifier()
    token = forge()
    lookup = {**REQUEST, "creates_task": False}
    verifier.verify(token, **lookup)
    verifier.verify(token, **lookup)
    verifier.verify(token, **REQUEST)
    with pytest.raises(DelegationDenied) as denied:
        verifier.verify(token, **REQUEST)
    assert denied.value.reason is R.REPLAYED_JTI


def test_padding_variant_cannot_bypass_the_replay_guard() -> None:
    """A second spelling of the same token is refused before it reaches the replay guard."""
    verifier = make_verifier()
    token = forge()
    verifier.verify(token, **REQUEST)
    for variant in (token + "=", token + "==", token.replace(".", "=.", 1)):
        with pytest.raises(DelegationDenied) as denied:
            verifier.verify(variant, **REQUEST)
        assert denied.value.reason in (R.TOKEN_MALFORMED, R.REPLAYED_JTI)


def test_denials_never_echo_the_token() -> None:
    """No part of a presented token appears in the denial's message."""
    token = forge(key=ATTACKER_KEY.private_key)
    with pytest.raises(DelegationDenied) as denied:
        make_verifier().verify(token, **REQUEST)
    for segment in token.split("."):
        assert segment not in str(denied.value)
    assert denied.value.www_authenticate().startswith('Bearer error="invalid_token"')


def test_forbidden_denial_uses_the_insufficient_scope_challenge() -> None:
    """A 403 denial carries the RFC 6750 insufficient_scope challenge."""
    with pytest.raises(DelegationDenied) as denied:
        make_verifier().verify(forge(payload=claims(scope="ops:read")), **REQUEST)
    assert denied.value.http_status == 403
    assert 'error="insufficient_scope"' in denied.value.www_authenticate()


def test_full_replay_guard_fails_closed() -> None:
    """When the replay guard cannot record another token the request is refused with 503."""
    verifier = make_verifier(replay_guard=InMemoryReplayGuard(_clock, max_entries=1))
    verifier.verify(forge(payload=claims(jti="first")), **REQUEST)
    with pytest.raises(DelegationDenied) as denied:
        verifier.verify(forge(payload=claims(jti="second")), **REQUEST)
    assert denied.value.reason is R.REPLAY_GUARD_UNAVAILABLE
    assert denied.value.http_status == 503


def test_replay_guard_entries_expire_after_the_token() -> None:
    """An entry is forgotten once its token's exp plus leeway has passed."""
    now = [NOW]
    guard = InMemoryReplayGuard(lambda: now[0], leeway=timedelta(seconds=30))
    assert guard.claim_task_creation("j", T + 60, issuer=ISSUER)
    assert not guard.claim_task_creation("j", T + 60, issuer=ISSUER)
    assert guard.claim_task_creation("j", T + 60, issuer=OTHER_ISSUER)
    now[0] = NOW + timedelta(seconds=91)
    assert guard.claim_task_creation("j", T + 200, issuer=ISSUER)


def test_replay_guard_claim_is_atomic() -> None:
    """Of many threads claiming one jti at once, exactly one wins."""
    guard = InMemoryReplayGuard(_clock)
    results: list[bool] = []
    barrier = threading.Barrier(16)

    def claim() -> None:
        barrier.wait()
        results.append(guard.claim_task_creation("same", T + 60, issuer=ISSUER))

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1 and len(results) == 16


@pytest.mark.parametrize(
    "overrides",
    [
        {"leeway": timedelta(minutes=5)},
        {"max_lifetime": timedelta(0)},
        {"max_act_depth": 0},
    ],
)
def test_unsafe_configuration_is_refused(overrides: dict[str, Any]) -> None:
    """A verifier cannot be built with a long leeway, no lifetime cap, or no act hops."""
    with pytest.raises(ValueError):
        make_verifier(**overrides)


def test_every_reason_code_is_documented() -> None:
    """docs/delegation-token.md lists every reason code with its HTTP status."""
    text = (Path(__file__).parents[2] / "docs" / "delegation-token.md").read_text()
    for reason, info in REASONS.items():
        assert f"| `{reason.value}` | {info.http_status} |" in text, reason


def _respelled_last_character(segment: str) -> str:
    """The same bytes spelled non-canonically: the last character's unused low bit set."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(segment[-1])
    return segment[:-1] + alphabet[last ^ 1]


@pytest.mark.parametrize(
    "respell",
    [
        pytest.param(_respelled_last_character, id="non_canonical_base64url"),
        pytest.param(lambda signature: signature + "AAA", id="length_one_mod_four"),
    ],
)
def test_signature_segment_is_decoded_strictly(respell: Callable[[str], str]) -> None:
    """A signature segment that is not canonical unpadded base64url is malformed, as PyJWS
    refused it before the verifier checked signatures itself."""
    head, body, signature = forge().split(".")
    assert b64url_decode(signature)
    with pytest.raises(DelegationDenied) as denied:
        make_verifier().verify(f"{head}.{body}.{respell(signature)}", **REQUEST)
    assert denied.value.reason is R.TOKEN_MALFORMED


def test_es256_signature_of_the_wrong_length_is_invalid() -> None:
    """A truncated ES256 signature does not verify (PyJWT's algorithm checks its length)."""
    token = mint_token(Grant.model_validate(claims(iss=OTHER_ISSUER)), OTHER_ISSUER_KEY)
    head, body, signature = token.split(".")
    truncated = b64url_encode(b64url_decode(signature)[:-3])
    with pytest.raises(DelegationDenied) as denied:
        make_verifier().verify(f"{head}.{body}.{truncated}", **REQUEST)
    assert denied.value.reason is R.SIGNATURE_INVALID


def test_every_changed_character_of_the_signed_segments_is_refused() -> None:
    """The claims parsed once before the signature check are the bytes it covers: changing
    any character of the header or payload segment of a valid token gets it refused."""
    head, body, signature = forge().split(".")
    verifier = make_verifier()
    lookup = {**REQUEST, "creates_task": False}
    for index in range(len(head) + 1 + len(body)):
        signed = f"{head}.{body}"
        if signed[index] == ".":
            continue
        swapped = "B" if signed[index] != "B" else "C"
        changed = f"{signed[:index]}{swapped}{signed[index + 1 :]}.{signature}"
        with pytest.raises(DelegationDenied):
            verifier.verify(changed, **lookup)
