"""Delegation chains: the rules one hop of a chain keeps, checked offline.

A chain starts at a token the run's owner minted for a handoff and grows by token
exchange (RFC 8693): the holder of a token asks the owner for a child for a third agent.
Each child names its parent (``parent.jti`` and ``parent.hash``, the byte-commitment of
:func:`contracts.grant.token_hash`) and, given the parent token, anyone can check the
link with :func:`link_problem` without asking the owner:

1. ``parent.jti`` is the parent's ``jti`` and ``parent.hash`` the hash of its exact bytes;
2. the same issuer signed both (the run's owner mints every hop);
3. the child is nowhere wider than the parent (:func:`contracts.grant.widened_dimension`:
   principal, tenant, scope, times, final owner, every budget figure);
4. the ``act`` chain is the parent's with exactly one actor on top, and that actor is the
   parent's audience (only the holder of a token delegates from it);
5. the child's holder key, if it names one (``cnf.jkt``, RFC 9449), is the holder's:
   its thumbprint URI is the parent's audience (``cnf_not_holder``);
6. the child's audience is no agent already in the chain (:func:`loops`), and the chain
   is no deeper than the limit.

What the offline check cannot give is the exactness of nested budgets across siblings
(that each child's budget came out of what the parent had left after its other children):
only the owner, which records every hop, knows the siblings. That is why children are
minted by exchange at the owner and not by the holders themselves.

Pure: no clock, no keys, no I/O.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping

from contracts.canonical import canonical_json
from contracts.grant import THUMBPRINT_URI_PREFIX, Actor, Grant, token_hash, widened_dimension

# The deepest ``act`` chain a child may have: the owner's hop, then two agents delegating.
MAX_CHAIN_DEPTH = 3
# RFC 8693 token exchange, as the owner serves it (docs/delegation-token.md).
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
# The holder's proof of possession sent as the exchange's actor_token.
PROOF_TYP = "chain-proof+jwt"
PROOF_LIFETIME = 60
ACTOR_TOKEN_PARAMETER = "actor_token"


def request_binding(parameters: Mapping[str, str]) -> str:
    """A proof's ``req`` claim: ``"sha-256:" + base64url(SHA-256(JCS(covered)))`` where
    ``covered`` is every exchange parameter except ``actor_token`` (names and values as
    strings), so the proof is good for this one request only."""
    covered = {k: v for k, v in parameters.items() if k != ACTOR_TOKEN_PARAMETER}
    digest = hashlib.sha256(canonical_json(covered)).digest()
    return "sha-256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def actors(act: Actor | None) -> list[str]:
    """The ``sub`` of every actor in ``act``, newest first."""
    found: list[str] = []
    while act is not None:
        found.append(act.sub)
        act = act.act
    return found


def loops(audience: str, act: Actor | None, issuer: str) -> bool:
    """Whether a hop to ``audience`` returns to a party already in the chain ``act`` (the
    owner ``issuer`` included)."""
    return audience == issuer or audience in actors(act)


def link_problem(
    child: Grant, parent: Grant, parent_token: str, max_depth: int = MAX_CHAIN_DEPTH
) -> str | None:
    """Why ``child`` is no sound hop from ``parent`` (whose compact JWS is
    ``parent_token``), as a stable reason; None when it is one."""
    if child.parent is None:
        return "parent_missing"
    if child.parent.jti != parent.jti or child.parent.hash != token_hash(parent_token):
        return "parent_hash_mismatch"
    if child.iss != parent.iss:
        return "issuer_changed"
    widened = widened_dimension(child, parent)
    if widened is not None:
        return f"widens_{widened.value.replace('.', '_')}"
    if child.act is None or child.act.act != parent.act or child.act.sub != parent.aud:
        return "act_not_one_deeper"
    if child.cnf is not None and THUMBPRINT_URI_PREFIX + child.cnf.jkt != parent.aud:
        return "cnf_not_holder"
    if child.act_depth > max_depth:
        return "chain_too_deep"
    if loops(child.aud, child.act, child.iss):
        return "chain_loop"
    return None


def chain_problem(
    tokens: list[tuple[str, Grant]], max_depth: int = MAX_CHAIN_DEPTH
) -> tuple[int, str] | None:
    """The first unsound link of a chain given root first as (compact JWS, its verified
    claims) pairs: the index of the child and the reason; None when every link holds."""
    for index in range(1, len(tokens)):
        parent_token, parent = tokens[index - 1]
        problem = link_problem(tokens[index][1], parent, parent_token, max_depth)
        if problem is not None:
            return index, problem
    return None
