"""A chain the owner minted checks offline, and a verifier written from the docs alone
(tests/outside_chain_verifier.py) agrees with ours (contracts.chain) on every link.

The genuine chain is owner -> privacy -> legal -> legal-2, minted by exchange at a real
coordinator. Each variant is a child rewritten and re-signed with the owner's own key
(what a faulty or dishonest owner could sign): both verifiers must name the same broken
link and reason.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent_cards.keys import KeySet, b64url_encode, load_key_set
from contracts import strict_json
from contracts.chain import chain_problem
from contracts.grant import Grant
from tests import outside_chain_verifier as outside
from tests.chains import (
    PRIVACY,
    TERMS,
    TERMS_2,
    ChainFederation,
    chain_federation,
    claims_of,
    half,
)

Claims = dict[str, Any]


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], Any, KeySet]]:
    with chain_federation(tmp_path_factory.mktemp("offline")) as chain:
        yield build(chain), owner_jwks(chain), load_key_set(chain.data_dir / "keys")


def owner_jwks(chain: ChainFederation) -> Any:
    return httpx.get(f"{chain.url}/.well-known/jwks.json").json()


def build(chain: ChainFederation) -> list[str]:
    root, parent, _ = chain.parent_token()
    second = chain.exchange(root, PRIVACY, TERMS, half(parent)).json()["access_token"]
    child = Grant.model_validate(claims_of(second))
    third = chain.exchange(second, TERMS, TERMS_2, half(child, actions=0))
    return [root, second, third.json()["access_token"]]


def ours(tokens: list[str]) -> tuple[int, str] | None:
    grants = [Grant.model_validate(claims_of(token)) for token in tokens]
    return chain_problem(list(zip(tokens, grants, strict=True)))


def unsigned_resign(keys: KeySet, claims: Claims) -> str:
    """``claims`` signed by the owner's key, whatever they hold (a faulty owner)."""
    from jwt.algorithms import get_default_algorithms

    key = keys.signing_key()
    header = {"alg": key.alg, "kid": key.kid, "typ": "delegation+jwt"}
    signing_input = (
        f"{b64url_encode(strict_json.dumps(header))}.{b64url_encode(strict_json.dumps(claims))}"
    )
    signature = get_default_algorithms()[key.alg].sign(signing_input.encode(), key.private_key)
    return f"{signing_input}.{b64url_encode(signature)}"


def _set(path: str, value: Any) -> Callable[[Claims, list[str]], None]:
    def change(claims: Claims, tokens: list[str]) -> None:
        target = claims
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value(claims, tokens) if callable(value) else value

    return change


DELETE = object()
VARIANTS: dict[str, Callable[[Claims, list[str]], None]] = {
    "genuine": lambda claims, tokens: None,
    "no_parent": _set("parent", DELETE),
    "parent_hash_of_another_token": _set("parent.hash", lambda c, t: outside.token_hash(t[2])),
    "parent_jti_of_another_token": _set("parent.jti", "jti-someone-else"),
    "issuer_changed": _set("iss", "urn:another-owner"),
    "principal_changed": _set("sub", "run:another"),
    "tenant_changed": _set("tenant", "another-tenant"),
    "scope_widened": _set("scope", "terms:check privacy:review admin:all"),
    "outlives_parent": _set("exp", lambda c, t: c["exp"] + 3600),
    "more_actions": _set("handoff.budget.actions", 1000),
    "more_context_units": _set("handoff.budget.context_units", 10**9),
    "model_limit_dropped": _set("handoff.budget.model_requests", DELETE),
    "final_owner_changed": _set("handoff.final_owner", "someone-else"),
    "act_not_deeper": _set("act", lambda c, t: c["act"]["act"]),
    "act_names_another_holder": _set("act.sub", "urn:not-the-holder"),
    "cnf_names_another_key": _set("cnf.jkt", "A" * 43),
    "cnf_names_the_audience": _set("cnf.jkt", lambda c, t: c["aud"].rpartition(":")[2]),
    "loop_to_an_actor": _set("aud", lambda c, t: c["act"]["sub"]),
    "loop_to_the_owner": _set("aud", lambda c, t: c["iss"]),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("link", [1, 2])
def test_the_outside_verifier_agrees_with_ours(
    genuine: tuple[list[str], Any, KeySet], variant: str, link: int
) -> None:
    tokens, jwks, keys = genuine
    claims = copy.deepcopy(claims_of(tokens[link]))
    VARIANTS[variant](claims, tokens)
    forged = [*tokens[:link], unsigned_resign(keys, claims)]
    theirs = outside.check(forged, jwks)
    assert ours(forged) == theirs
    assert (theirs is None) == (variant == "genuine"), theirs


def test_a_chain_deeper_than_the_limit_is_refused_alike(
    genuine: tuple[list[str], Any, KeySet],
) -> None:
    """A fourth hop the owner would never mint, signed with its key anyway."""
    tokens, jwks, keys = genuine
    last = claims_of(tokens[-1])
    fourth = copy.deepcopy(last)
    fourth["act"] = {"sub": last["aud"], "act": last["act"]}
    fourth["aud"] = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:" + "B" * 43
    fourth["jti"] = "jti-fourth"
    fourth["cnf"] = {"jkt": last["aud"].rpartition(":")[2]}  # bound to its holder
    fourth["parent"] = {"jti": last["jti"], "hash": outside.token_hash(tokens[-1])}
    forged = [*tokens, unsigned_resign(keys, fourth)]
    assert ours(forged) == outside.check(forged, jwks) == (3, "chain_too_deep")
