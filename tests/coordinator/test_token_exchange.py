"""Token exchange at the run's owner (RFC 8693), held to every rule of a chain.

A real coordinator process serves ``/token-exchange``; the privacy team's member (kit,
loopback) holds a token the owner minted for a run, and the test acts as that member (its
key in hand) or as an adversary (another member's key, a forged token, a replayed proof).
Every refusal is a 4xx with a stable reason; every hop granted is in the ledger, names
its parent by the hash of its bytes, and is verifiable offline (contracts.chain).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from agent_cards.keys import KeySet, b64url_encode
from agent_cards.trusted import TrustedKeys
from contracts.chain import JWT_TOKEN_TYPE, link_problem
from contracts.grant import Budget, Grant, token_hash
from coordinator.authority.tokens import mint_token
from member_kit.trust.chain import exchange_parameters, proof
from tests.chains import (
    GUARDED,
    GUARDED_SKILL,
    OPERATOR,
    PRIVACY,
    TERMS,
    TERMS_2,
    TERMS_SKILL,
    ChainFederation,
    chain_federation,
    claims_of,
    half,
)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainFederation]:
    with chain_federation(tmp_path_factory.mktemp("exchange"), replica=True) as federation:
        yield federation


def reason(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["reason"]


def coordinator_keys(chain: ChainFederation) -> TrustedKeys:
    return TrustedKeys.from_json(httpx.get(f"{chain.url}/.well-known/jwks.json").json())


def verified(chain: ChainFederation, token: str) -> Grant:
    """The child's claims after its signature verified with the owner's published key."""
    import jwt

    header = jwt.get_unverified_header(token)
    key = coordinator_keys(chain).get(header["kid"])
    assert key is not None
    claims = jwt.decode(token, key.public_key, algorithms=[key.alg], options={"verify_aud": False})
    return Grant.model_validate(claims)


def test_a_child_names_its_parent_narrows_it_and_is_accepted_by_its_agent(
    chain: ChainFederation,
) -> None:
    token, parent, run_id = chain.parent_token()
    answer = chain.exchange(token, PRIVACY, TERMS, half(parent))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["issued_token_type"] == JWT_TOKEN_TYPE and body["token_type"] == "N_A"
    assert answer.headers["cache-control"] == "no-store"
    child = verified(chain, body["access_token"])
    assert child.parent is not None and child.parent.hash == token_hash(token)
    assert link_problem(child, parent, token) is None
    assert (child.sub, child.tenant) == (parent.sub, parent.tenant)
    assert child.scope == "terms:check" and child.exp <= parent.exp
    assert child.act is not None and child.act.sub == parent.aud and child.act.act == parent.act
    done = chain.send(body["endpoint"], body["access_token"], body["handoff_id"], TEXT)
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    shown = chain.client.get(f"{chain.url}/v1/audit/runs/{run_id}", headers=OPERATOR).json()
    [hop] = shown["hops"]
    assert hop["granted"] and (hop["jti"], hop["parent_jti"]) == (child.jti, parent.jti)
    assert (hop["holder"], hop["to"], hop["depth"]) == (parent.aud, TERMS, 2)
    assert hop["parent_hash"] == token_hash(token)
    assert body["access_token"] not in json.dumps(shown)  # never a token in the ledger


TEXT = {"text": "No refunds.", "terms": ["refund"]}


def test_a_child_is_accepted_by_an_unmodified_agent_behind_the_guard(
    chain: ChainFederation,
) -> None:
    token, parent, _ = chain.parent_token()
    answer = chain.exchange(token, PRIVACY, GUARDED, half(parent), skill=GUARDED_SKILL)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    data = {"text": "the quick brown fox"}
    done = chain.send(body["endpoint"], body["access_token"], body["handoff_id"], data, "summarize")
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    # and a child for another agent is refused there, as any token for another agent
    other = chain.exchange(token, PRIVACY, TERMS, half(parent, actions=0)).json()
    refused = chain.send(body["endpoint"], other["access_token"], body["handoff_id"], data)
    assert "result" not in refused, refused


def test_budgets_nest_exactly_across_children(chain: ChainFederation) -> None:
    """Two children take the parent's context units between them, to the unit; a third
    asking for one more unit is refused."""
    token, parent, _ = chain.parent_token()
    units = parent.handoff.budget.context_units
    first = chain.exchange(token, PRIVACY, TERMS, half(parent, actions=0))
    second = chain.exchange(
        token, PRIVACY, TERMS_2, half(parent, actions=0, context_units=units - units // 2)
    )
    assert (first.status_code, second.status_code) == (200, 200), second.text
    third = chain.exchange(token, PRIVACY, TERMS, half(parent, actions=0, context_units=1))
    assert reason(third) == (403, "budget_exceeded")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("scope_beyond_parent", (403, "scope_widened")),
        ("scope_beyond_skill", (403, "scope_widened")),
        ("more_actions", (403, "budget_exceeded")),
        ("more_context_units", (403, "budget_exceeded")),
        ("effects_on_a_read_only_skill", (403, "budget_exceeded")),
        ("outlives_its_parent", (403, "expiry_widened")),
        ("unknown_agent", (404, "unknown_target")),
        ("unknown_skill", (404, "unknown_target")),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_widening_in_each_dimension_is_refused(
    chain: ChainFederation, case: str, expected: tuple[int, str]
) -> None:
    token, parent, _ = chain.parent_token()
    held = parent.handoff.budget
    asks: dict[str, dict[str, Any]] = {
        "scope_beyond_parent": {"budget": half(parent), "scope": "terms:check admin:all"},
        "scope_beyond_skill": {"budget": half(parent), "scope": "privacy:review"},
        "more_actions": {"budget": half(parent, actions=held.actions + 1)},
        "more_context_units": {"budget": half(parent, context_units=held.context_units + 1)},
        "effects_on_a_read_only_skill": {"budget": half(parent, effects=1)},
        "outlives_its_parent": {"budget": half(parent), "expires_in": 24 * 3600},
        "unknown_agent": {"budget": half(parent), "agent": "nobody"},
        "unknown_skill": {"budget": half(parent), "skill": "no-such-skill"},
    }
    ask = asks[case]
    answer = chain.exchange(
        token,
        PRIVACY,
        ask.pop("agent", TERMS),
        ask.pop("budget"),
        **({"skill": ask.pop("skill")} if "skill" in ask else {}),
        **ask,
    )
    assert reason(answer) == expected


def test_a_chain_past_the_depth_limit_is_refused(chain: ChainFederation) -> None:
    """owner -> privacy -> legal -> legal-2 is three hops (the limit); a fourth is refused."""
    token, parent, _ = chain.parent_token()
    second = chain.exchange(token, PRIVACY, TERMS, half(parent)).json()["access_token"]
    child = Grant.model_validate(claims_of(second))
    third = chain.exchange(second, TERMS, TERMS_2, half(child, actions=0))
    assert third.status_code == 200, third.text
    grandchild = Grant.model_validate(claims_of(third.json()["access_token"]))
    assert grandchild.act_depth == 3
    fourth = chain.exchange(
        third.json()["access_token"], TERMS_2, TERMS, half(grandchild, actions=0)
    )
    assert reason(fourth) == (403, "chain_too_deep")


def test_a_loop_is_refused(chain: ChainFederation) -> None:
    """legal -> privacy returns to an agent already in the chain; so does privacy -> itself."""
    token, parent, _ = chain.parent_token()
    second = chain.exchange(token, PRIVACY, TERMS, half(parent)).json()["access_token"]
    child = Grant.model_validate(claims_of(second))
    back = chain.exchange(second, TERMS, PRIVACY, half(child, actions=0), skill="review-privacy")
    assert reason(back) == (403, "chain_loop")
    itself = chain.exchange(token, PRIVACY, PRIVACY, half(parent), skill="review-privacy")
    assert reason(itself) == (403, "chain_loop")


def test_a_stolen_token_without_its_holders_key_is_refused(chain: ChainFederation) -> None:
    """The legal team presents the privacy team's token with a proof by its own key."""
    token, parent, run_id = chain.parent_token()
    answer = chain.exchange(token, PRIVACY, TERMS_2, half(parent), signer=TERMS)
    assert reason(answer) == (401, "proof_not_holder")
    shown = chain.client.get(f"{chain.url}/v1/audit/runs/{run_id}", headers=OPERATOR).json()
    assert shown["hops"] == []  # a stranger's attempts never grow the run's ledger


def test_a_replayed_proof_is_refused(chain: ChainFederation) -> None:
    token, parent, _ = chain.parent_token()
    parameters = signed(chain, token, half(parent))
    assert chain.post_form(parameters).status_code == 200
    assert reason(chain.post_form(parameters)) == (401, "proof_replayed")


def test_a_proof_for_another_request_is_refused(chain: ChainFederation) -> None:
    """The proof binds every parameter: a budget changed after signing breaks it."""
    token, parent, _ = chain.parent_token()
    parameters = signed(chain, token, half(parent))
    parameters["budget"] = exchange_parameters(token, TERMS, TERMS_SKILL, half(parent, actions=0))[
        "budget"
    ]
    assert reason(chain.post_form(parameters)) == (401, "proof_invalid")


def test_two_coordinator_processes_carve_one_parents_budget_exactly(
    chain: ChainFederation,
) -> None:
    """Both processes of the owner (one database) are asked at once for a child taking
    all the parent's context units: exactly one is granted."""
    token, parent, _ = chain.parent_token()
    budget = half(parent, actions=0, context_units=parent.handoff.budget.context_units)
    forms = [signed(chain, token, budget) for _ in range(2)]
    urls = [chain.url, chain.replica_url]
    barrier = threading.Barrier(2)

    def ask(index: int) -> httpx.Response:
        barrier.wait()
        return chain.post_form(forms[index], urls[index])

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(ask, range(2)))
    granted = [a for a in answers if a.status_code == 200]
    refused = [reason(a) for a in answers if a.status_code != 200]
    assert (len(granted), refused) == (1, [(403, "budget_exceeded")]), [a.text for a in answers]


def test_a_proof_replayed_at_another_coordinator_process_is_refused(
    chain: ChainFederation,
) -> None:
    token, parent, _ = chain.parent_token()
    parameters = signed(chain, token, half(parent))
    assert chain.post_form(parameters).status_code == 200
    assert reason(chain.post_form(parameters, chain.replica_url)) == (401, "proof_replayed")


@pytest.mark.parametrize(
    "case", ["not_a_jws", "stale", "long_lived", "wrong_audience", "wrong_issuer", "bad_signature"]
)
def test_a_bad_proof_is_refused(chain: ChainFederation, case: str) -> None:
    token, parent, _ = chain.parent_token()
    parameters = exchange_parameters(token, TERMS, TERMS_SKILL, half(parent))
    parameters["actor_token"] = bad_proof(chain.keys[PRIVACY], parent, parameters, case)
    assert reason(chain.post_form(parameters)) == (401, "proof_invalid")


def test_a_token_the_owner_did_not_sign_is_refused(chain: ChainFederation) -> None:
    """A member mints its own 'child' (signed by its key): never exchanged."""
    _, parent, _ = chain.parent_token()
    forged = mint_token(parent, chain.keys[PRIVACY].active)
    answer = chain.exchange(forged, PRIVACY, TERMS, half(parent))
    assert reason(answer) == (401, "subject_token_invalid")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("grant_type=x", "application/x-www-form-urlencoded"),
        ('{"grant_type": "x"}', "application/json"),
        ("a=1&a=2", "application/x-www-form-urlencoded"),
    ],
    ids=["missing_parameters", "json_body", "repeated_parameter"],
)
def test_a_malformed_request_is_refused(
    chain: ChainFederation, body: str, content_type: str
) -> None:
    answer = chain.client.post(
        chain.exchange_url, content=body, headers={"Content-Type": content_type}
    )
    assert reason(answer) == (400, "exchange_request_invalid")


def signed(chain: ChainFederation, token: str, budget: Budget) -> dict[str, str]:
    parameters = exchange_parameters(token, TERMS, TERMS_SKILL, budget)
    claims = claims_of(token)
    parameters["actor_token"] = proof(chain.keys[PRIVACY], claims["aud"], claims["iss"], parameters)
    return parameters


def bad_proof(keys: KeySet, parent: Grant, parameters: dict[str, str], case: str) -> str:
    if case == "not_a_jws":
        return "not-a-jws"
    good = proof(keys, parent.aud, parent.iss, parameters)
    header, claims, _ = good.split(".")
    values = claims_of(good)
    now = int(time.time())
    changes = {
        "stale": {"iat": now - 600, "exp": now - 550},
        "long_lived": {"exp": values["iat"] + 3600},
        "wrong_audience": {"aud": "urn:someone-else"},
        "wrong_issuer": {"iss": "urn:ietf:params:oauth:jwk-thumbprint:sha-256:" + "A" * 43},
        "bad_signature": {},
    }[case]
    if case == "bad_signature":
        return f"{header}.{claims}.{b64url_encode(b'x' * 64)}"
    return resign(keys, header, {**values, **changes})


def resign(keys: KeySet, header: str, claims: dict[str, Any]) -> str:
    from jwt.algorithms import get_default_algorithms

    from contracts import strict_json

    key = keys.active
    signing_input = f"{header}.{b64url_encode(strict_json.dumps(claims))}"
    signature = get_default_algorithms()[key.alg].sign(signing_input.encode(), key.private_key)
    return f"{signing_input}.{b64url_encode(signature)}"


def test_revoking_the_run_revokes_every_hop_and_refuses_further_exchange(
    chain: ChainFederation,
) -> None:
    """A revocation reaches every grant derived from the revoked one: the child minted
    by exchange is pushed to its agent, which refuses it from then on, and the revoked
    parent can mint no more children."""
    token, parent, run_id = chain.parent_token()
    body = chain.exchange(token, PRIVACY, TERMS, half(parent)).json()
    done = chain.send(body["endpoint"], body["access_token"], body["handoff_id"], TEXT)
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    revoked = chain.client.post(
        f"{chain.url}/v1/revocations", json={"target": run_id}, headers=OPERATOR
    )
    assert revoked.status_code == 200, revoked.text
    assert body["handoff_id"] in revoked.json()["handoffs"]
    pushes = {push["agent"]: push for push in revoked.json()["pushes"]}
    assert pushes[TERMS]["outcome"] == "pushed", pushes
    assert pushes[TERMS]["handoffs"] == [body["handoff_id"]]
    again = chain.send(body["endpoint"], body["access_token"], body["handoff_id"], TEXT)
    assert again["error"]["data"][0]["metadata"]["reason"] == "token_revoked", again
    refused = chain.exchange(token, PRIVACY, TERMS_2, half(parent, context_units=1))
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["reason"] == "token_revoked"
