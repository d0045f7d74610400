"""Figures (3b) and (3c): the CPU cost of checking a three-hop delegation chain, without
and with the holder's proof, against the one-hop token today, in one run.

One hop is what a member does today: :meth:`DelegationVerifier.verify` on the token it
received (every check, the replay claim left out as in figure 3; no holder proof, as the
owner mints its own tokens unbound by default). Three hops (3b) is that same check of
the leaf of owner -> A -> B -> C, plus the offline check of the chain
(docs/delegation-token.md, "Checking a chain offline"): each ancestor's signature with
the owner's key and :func:`contracts.chain.chain_problem` over the three links. Three
hops with holder proof (3c) is the chain as the exchange really mints it, each child
bound to its holder (``cnf.jkt``: the hop-2 token to A's key, the leaf to B's), checked
the same way, the leaf presented with a fresh DPoP proof by B's key per call (made
ahead, outside the timing: the proof is the caller's cost; taken once in the verifier's
in-memory record), so the chain check includes ``cnf_not_holder`` on each link. The
tokens are minted in-process the way the owner's exchange mints them (``narrow`` then
``mint_token``, each child naming its parent). The three sides are timed in ``repeat``
rounds, each a batch of ``number`` calls of every side one after the other (so a slower
moment of a shared machine hits all three), and the median batch of each is used.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import jwt

from agent_cards.dpop import proof
from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey
from contracts.chain import chain_problem
from contracts.grant import (
    Actor,
    Budget,
    DelegationRequest,
    Grant,
    Handoff,
    ParentRef,
    SkillAuthority,
    StateRef,
    narrow,
    token_hash,
)
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.holder import bound_to
from coordinator.authority.tokens import mint_token
from member_kit.trust.holder_proof import HolderRequest
from member_kit.trust.verifier import DelegationVerifier

SCOPE = "terms:check"
SKILL = SkillAuthority(id="check-terms", scopes=frozenset({SCOPE}), read_only=True)
# The leaf's agent's JSON-RPC URL as it publishes it: the proof's htu (never called).
LEAF_URL = "http://127.0.0.1:9/a2a/jsonrpc"


def _root(audience: str, now: int) -> Grant:
    budget = Budget(actions=8, context_units=64_000, effects=0, model_requests=8)
    return Grant(
        iss=DEFAULT_ISSUER,
        sub="run:bench",
        aud=audience,
        iat=now,
        nbf=now,
        exp=now + 300,
        jti="jti-root",
        scope=SCOPE,
        tenant="default",
        handoff=Handoff(
            id="handoff-1",
            attempt=1,
            duplicate_key="handoff-1",
            state_ref=StateRef(id="run-bench", version=0),
            final_owner="coordinator",
            budget=budget,
        ),
        act=Actor(sub=DEFAULT_ISSUER),
    )


def _child(parent: Grant, token: str, audience: str, hop: int) -> Grant:
    left = parent.handoff.budget
    budget = Budget(actions=1, context_units=left.context_units // 2, effects=0, model_requests=0)
    request = DelegationRequest(
        issuer=parent.iss,
        audience=audience,
        skill=SKILL,
        scope=SCOPE,
        handoff=Handoff(
            id=f"hop-{hop}",
            attempt=1,
            duplicate_key=f"hop-{hop}",
            state_ref=parent.handoff.state_ref,
            final_owner=parent.handoff.final_owner,
            budget=budget,
        ),
        jti=f"jti-hop-{hop}",
        issued_at=parent.iat,
        expires_at=parent.exp,
        actor=parent.aud,
    )
    child = narrow(parent, request, max_act_depth=3)
    parent_ref = ParentRef(jti=parent.jti, hash=token_hash(token)).model_dump()
    return Grant.model_validate({**child.claims(), "parent": parent_ref})


def chain(
    owner: SigningKey, members: list[SigningKey], now: int, *, bound: bool = False
) -> list[str]:
    """owner -> members[0] -> members[1] -> members[2], as compact tokens root first;
    ``bound``: each child names its holder's key, the member the parent was for."""
    grant = _root(identity_of(members[0].verification_key()), now)
    tokens = [mint_token(grant, owner)]
    for hop, member in enumerate(members[1:], start=2):
        grant = _child(grant, tokens[-1], identity_of(member.verification_key()), hop)
        if bound:
            grant = bound_to(grant, members[hop - 2])
        tokens.append(mint_token(grant, owner))
    return tokens


def interleaved(
    sides: dict[str, Callable[[], object]], number: int, repeat: int
) -> dict[str, list[float]]:
    """Seconds per call of each side: ``repeat`` rounds of a batch of each, in turn,
    after a warm-up of a tenth of a batch each."""
    for call in sides.values():
        for _ in range(max(1, number // 10)):
            call()
    batches: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeat):
        for name, call in sides.items():
            started = time.perf_counter()
            for _ in range(number):
                call()
            batches[name].append((time.perf_counter() - started) / number)
    return batches


def measure(number: int, repeat: int) -> dict[str, Any]:
    owner = SigningKey.generate()
    members = [SigningKey.generate() for _ in range(3)]
    now = int(time.time())
    tokens = chain(owner, members, now)
    bound = chain(owner, members, now, bound=True)
    one_hop = tokens[0]
    leaf_audience = identity_of(members[2].verification_key())
    first_audience = identity_of(members[0].verification_key())
    trusted = {DEFAULT_ISSUER: KeySet(active=owner).trusted_keys()}
    leaf_verifier = DelegationVerifier(trusted, leaf_audience, max_act_depth=3)
    first_verifier = DelegationVerifier(trusted, first_audience, max_act_depth=3)
    bound_verifier = DelegationVerifier(trusted, leaf_audience, max_act_depth=3)
    public = owner.verification_key().public_key
    # one fresh proof by the leaf's holder (B) per call of the bound side, made ahead
    calls = number * repeat + max(1, number // 10)
    proofs: Iterator[str] = iter(
        [proof(members[1], "POST", LEAF_URL, bound[-1]) for _ in range(calls)]
    )

    def check(
        verifier: DelegationVerifier, token: str, handoff: str, holder: HolderRequest | None
    ) -> Grant:
        return verifier.verify(
            token,
            skill_id=SKILL.id,
            required_scopes=(SCOPE,),
            handoff_id=handoff,
            read_only=True,
            holder=holder,
        ).grant

    def offline(chain_tokens: list[str], leaf: Grant) -> Grant:
        ancestors = [
            Grant.model_validate(
                jwt.decode(token, public, algorithms=[owner.alg], options={"verify_aud": False})
            )
            for token in chain_tokens[:-1]
        ]
        problem = chain_problem(list(zip(chain_tokens, [*ancestors, leaf], strict=True)))
        assert problem is None, problem
        return leaf

    def one() -> object:
        return check(first_verifier, one_hop, "handoff-1", None)

    def three() -> object:
        return offline(tokens, check(leaf_verifier, tokens[-1], "hop-3", None))

    def three_held() -> object:
        held = HolderRequest(next(proofs), "POST", LEAF_URL)
        return offline(bound, check(bound_verifier, bound[-1], "hop-3", held))

    batches = interleaved({"one": one, "three": three, "held": three_held}, number, repeat)
    baseline = statistics.median(batches["one"])
    return {
        "three_hop_us": [b * 1e6 for b in batches["three"]],
        "three_hop_holder_us": [b * 1e6 for b in batches["held"]],
        "one_hop_us": [b * 1e6 for b in batches["one"]],
        "ratio": statistics.median(batches["three"]) / baseline,
        "holder_ratio": statistics.median(batches["held"]) / baseline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
