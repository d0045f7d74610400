"""Figure (3b): the CPU cost of checking a three-hop delegation chain against one hop.

One hop is what a member does today: :meth:`DelegationVerifier.verify` on the token it
received (every check, the replay claim left out as in figure 3). Three hops is that
same check of the leaf of owner -> A -> B -> C, plus the offline check of the chain
(docs/delegation-token.md, "Checking a chain offline"): each ancestor's signature with
the owner's key and :func:`contracts.chain.chain_problem` over the three links. The
tokens are minted in-process the way the owner's exchange mints them (``narrow`` then
``mint_token``, each child naming its parent). No holder proof is included on either
side. Each side is timed in ``repeat`` batches of ``number`` calls, the median batch
used. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jwt

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey
from bench.token_cost import per_call
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
from coordinator.authority.tokens import mint_token
from member_kit.trust.verifier import DelegationVerifier

SCOPE = "terms:check"
SKILL = SkillAuthority(id="check-terms", scopes=frozenset({SCOPE}), read_only=True)


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


def chain(owner: SigningKey, members: list[SigningKey], now: int) -> list[str]:
    """owner -> members[0] -> members[1] -> members[2], as compact tokens root first."""
    grant = _root(identity_of(members[0].verification_key()), now)
    tokens = [mint_token(grant, owner)]
    for hop, member in enumerate(members[1:], start=2):
        grant = _child(grant, tokens[-1], identity_of(member.verification_key()), hop)
        tokens.append(mint_token(grant, owner))
    return tokens


def measure(number: int, repeat: int) -> dict[str, object]:
    owner = SigningKey.generate()
    members = [SigningKey.generate() for _ in range(3)]
    now = int(time.time())
    tokens = chain(owner, members, now)
    one_hop = tokens[0]
    leaf_audience = identity_of(members[2].verification_key())
    first_audience = identity_of(members[0].verification_key())
    trusted = {DEFAULT_ISSUER: KeySet(active=owner).trusted_keys()}
    leaf_verifier = DelegationVerifier(trusted, leaf_audience, max_act_depth=3)
    first_verifier = DelegationVerifier(trusted, first_audience, max_act_depth=3)
    public = owner.verification_key().public_key

    def check(verifier: DelegationVerifier, token: str, handoff: str) -> Grant:
        return verifier.verify(
            token,
            skill_id=SKILL.id,
            required_scopes=(SCOPE,),
            handoff_id=handoff,
            read_only=True,
        ).grant

    def one() -> object:
        return check(first_verifier, one_hop, "handoff-1")

    def three() -> object:
        leaf = check(leaf_verifier, tokens[-1], "hop-3")
        ancestors = [
            Grant.model_validate(
                jwt.decode(token, public, algorithms=[owner.alg], options={"verify_aud": False})
            )
            for token in tokens[:-1]
        ]
        problem = chain_problem(list(zip(tokens, [*ancestors, leaf], strict=True)))
        assert problem is None, problem
        return leaf

    three_batches = per_call(three, number, repeat)
    one_batches = per_call(one, number, repeat)
    return {
        "three_hop_us": [b * 1e6 for b in three_batches],
        "one_hop_us": [b * 1e6 for b in one_batches],
        "ratio": statistics.median(three_batches) / statistics.median(one_batches),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
