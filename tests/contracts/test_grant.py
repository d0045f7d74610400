"""Delegation grants only narrow: property tests over random parents, requests and mutations."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.grant import (
    DEFAULT_MAX_ACT_DEPTH,
    Actor,
    Budget,
    DelegationRequest,
    Dimension,
    Grant,
    Handoff,
    NarrowingError,
    SkillAuthority,
    StateRef,
    claims_digest,
    is_narrower_or_equal,
    narrow,
    widened_dimension,
)

UNIVERSE = ("risk:read", "risk:write", "ops:read", "privacy:read", "admin")
T0 = 1_796_000_000

counts = st.integers(min_value=0, max_value=50)
scope_sets = st.sets(st.sampled_from(UNIVERSE), min_size=1)


def _scope(scopes: set[str] | frozenset[str]) -> str:
    return " ".join(sorted(scopes))


def _chain(depth: int) -> Actor | None:
    act = None
    for hop in range(depth):
        act = Actor(sub=f"agent-{hop}", act=act)
    return act


def _handoff(budget: Budget, handoff_id: str = "run-1", owner: str = "coordinator") -> Handoff:
    return Handoff(
        id=handoff_id,
        attempt=1,
        duplicate_key=f"{handoff_id}:key",
        state_ref=StateRef(id="state-1", version=3),
        final_owner=owner,
        budget=budget,
    )


@st.composite
def parents(draw: st.DrawFn, max_depth: int = DEFAULT_MAX_ACT_DEPTH - 1) -> Grant:
    iat = T0 + draw(st.integers(0, 100))
    budget = Budget(actions=draw(counts), context_units=draw(counts), effects=draw(counts))
    return Grant(
        iss="user-idp",
        sub="alice",
        aud="coordinator",
        iat=iat,
        nbf=iat + draw(st.integers(0, 10)),
        exp=iat + draw(st.integers(60, 3600)),
        jti="parent-1",
        scope=_scope(draw(scope_sets)),
        tenant="tenant-a",
        handoff=_handoff(budget),
        act=_chain(draw(st.integers(0, max_depth))),
    )


@st.composite
def valid_requests(draw: st.DrawFn, parent: Grant) -> DelegationRequest:
    """A request that narrows ``parent`` in every dimension (possibly to equality)."""
    scopes = draw(st.sets(st.sampled_from(sorted(parent.scopes)), min_size=1))
    extra_skill = draw(st.sets(st.sampled_from(UNIVERSE)))
    read_only = draw(st.booleans())
    left = parent.handoff.budget
    budget = Budget(
        actions=draw(st.integers(0, left.actions)),
        context_units=draw(st.integers(0, left.context_units)),
        effects=0 if read_only else draw(st.integers(0, left.effects)),
    )
    issued = draw(st.integers(parent.iat, parent.exp - 2))
    not_before = draw(st.integers(max(issued, parent.nbf), parent.exp - 1))
    return DelegationRequest(
        issuer="coordinator",
        audience="remote-risk",
        skill=SkillAuthority(
            id="assess", scopes=frozenset(scopes | extra_skill), read_only=read_only
        ),
        scope=_scope(scopes),
        handoff=_handoff(budget, "handoff-7"),
        jti="child-1",
        issued_at=issued,
        not_before=not_before,
        expires_at=draw(st.integers(not_before + 1, parent.exp)),
        sub=draw(st.sampled_from([None, parent.sub])),
        tenant=draw(st.sampled_from([None, parent.tenant])),
    )


@st.composite
def any_requests(draw: st.DrawFn, parent: Grant) -> DelegationRequest:
    """A request with arbitrary values, widening or not."""
    skill_scopes = draw(st.sets(st.sampled_from(UNIVERSE)))
    issued = draw(st.integers(parent.iat - 50, parent.exp + 50))
    not_before = draw(st.integers(issued - 20, issued + 20))
    return DelegationRequest(
        issuer="coordinator",
        audience="remote-risk",
        skill=SkillAuthority(id="s", scopes=frozenset(skill_scopes), read_only=draw(st.booleans())),
        scope=_scope(draw(scope_sets)),
        handoff=_handoff(
            Budget(actions=draw(counts), context_units=draw(counts), effects=draw(counts)),
            "handoff-7",
            draw(st.sampled_from(["coordinator", "someone-else"])),
        ),
        jti="child-1",
        issued_at=max(issued, 0),
        not_before=max(not_before, 0),
        expires_at=max(draw(st.integers(issued - 10, parent.exp + 100)), 0),
        sub=draw(st.sampled_from([None, "alice", "mallory"])),
        tenant=draw(st.sampled_from([None, "tenant-a", "tenant-b"])),
    )


def _assert_within(child: Grant, parent: Grant, request: DelegationRequest) -> None:
    assert child.sub == parent.sub and child.tenant == parent.tenant
    assert child.scopes <= parent.scopes and child.scopes <= request.skill.scopes
    assert parent.iat <= child.iat and parent.nbf <= child.nbf and child.exp <= parent.exp
    assert child.handoff.budget.exceeds(parent.handoff.budget) is None
    assert not request.skill.read_only or child.handoff.budget.effects == 0
    assert child.act_depth == parent.act_depth + 1 <= DEFAULT_MAX_ACT_DEPTH
    assert child.act is not None and child.act.act == parent.act
    assert child.handoff.final_owner == parent.handoff.final_owner


@given(data=st.data())
def test_narrowing_never_yields_a_wider_child(data: st.DataObject) -> None:
    """Whatever is requested, narrow either refuses or returns a child within the parent."""
    parent = data.draw(parents())
    request = data.draw(any_requests(parent))
    try:
        child = narrow(parent, request)
    except NarrowingError as refused:
        assert isinstance(refused.dimension, Dimension)
        return
    _assert_within(child, parent, request)
    assert is_narrower_or_equal(child, parent)


@given(data=st.data())
def test_a_narrowing_request_always_succeeds(data: st.DataObject) -> None:
    """A request inside every bound of its parent yields a child that the predicate accepts."""
    parent = data.draw(parents())
    request = data.draw(valid_requests(parent))
    child = narrow(parent, request)
    _assert_within(child, parent, request)
    assert widened_dimension(child, parent) is None


Mutation = Callable[[Grant, DelegationRequest, int], DelegationRequest]


def _with(request: DelegationRequest, **changes: Any) -> DelegationRequest:
    return DelegationRequest.model_validate({**dict(request), **changes})


def _with_budget(request: DelegationRequest, **changes: int) -> DelegationRequest:
    budget = request.handoff.budget.model_copy(update=changes)
    return _with(request, handoff=request.handoff.model_copy(update={"budget": budget}))


REQUEST_WIDENINGS: dict[Dimension, Mutation] = {
    Dimension.SUBJECT: lambda p, r, k: _with(r, sub="mallory"),
    Dimension.TENANT: lambda p, r, k: _with(r, tenant="tenant-b"),
    Dimension.FINAL_OWNER: lambda p, r, k: _with(
        r, handoff=r.handoff.model_copy(update={"final_owner": "someone-else"})
    ),
    Dimension.EXPIRY: lambda p, r, k: _with(r, expires_at=p.exp + k),
    Dimension.NOT_BEFORE: lambda p, r, k: _with(r, not_before=p.nbf - k),
    Dimension.ISSUED_AT: lambda p, r, k: _with(r, issued_at=p.iat - k),
    Dimension.ACTIONS: lambda p, r, k: _with_budget(r, actions=p.handoff.budget.actions + k),
    Dimension.CONTEXT_UNITS: lambda p, r, k: _with_budget(
        r, context_units=p.handoff.budget.context_units + k
    ),
    Dimension.EFFECTS: lambda p, r, k: _with_budget(r, effects=p.handoff.budget.effects + k),
}


@given(data=st.data(), dimension=st.sampled_from(sorted(REQUEST_WIDENINGS)), k=st.integers(1, 30))
def test_each_widening_is_refused_naming_its_dimension(
    data: st.DataObject, dimension: Dimension, k: int
) -> None:
    """Widening one dimension of a valid request raises NarrowingError for that dimension."""
    parent = data.draw(parents())
    request = REQUEST_WIDENINGS[dimension](parent, data.draw(valid_requests(parent)), k)
    with pytest.raises(NarrowingError) as refused:
        narrow(parent, request)
    assert refused.value.dimension is dimension


@given(data=st.data(), extra=st.sampled_from(UNIVERSE))
def test_scope_beyond_parent_or_skill_is_refused(data: st.DataObject, extra: str) -> None:
    """A scope the parent lacks, or the skill does not declare, is refused as scope."""
    parent = data.draw(parents())
    request = data.draw(valid_requests(parent))
    if extra in parent.scopes:  # held by the parent, so take it away from the skill
        skill_scopes = request.skill.scopes - {extra}
    else:  # declared by the skill, but the parent never held it
        skill_scopes = request.skill.scopes | {extra}
    skill = request.skill.model_copy(update={"scopes": skill_scopes})
    requested = frozenset(request.scope.split(" ")) | {extra}
    widened = _with(request, scope=_scope(requested), skill=skill)
    with pytest.raises(NarrowingError) as refused:
        narrow(parent, widened)
    assert refused.value.dimension is Dimension.SCOPE


@given(data=st.data(), effects=st.integers(1, 10))
def test_read_only_skill_gets_no_effect_budget(data: st.DataObject, effects: int) -> None:
    """Any effect budget for a read-only skill is refused, even within the parent's budget."""
    parent = data.draw(parents())
    request = data.draw(valid_requests(parent))
    skill = request.skill.model_copy(update={"read_only": True})
    widened = _with_budget(_with(request, skill=skill), effects=effects)
    with pytest.raises(NarrowingError) as refused:
        narrow(parent, widened)
    assert refused.value.dimension is Dimension.EFFECTS


@given(data=st.data())
def test_act_depth_limit_is_enforced(data: st.DataObject) -> None:
    """A parent already at the depth limit cannot delegate one hop further."""
    parent = data.draw(parents()).model_copy(update={"act": _chain(DEFAULT_MAX_ACT_DEPTH)})
    with pytest.raises(NarrowingError) as refused:
        narrow(parent, data.draw(valid_requests(parent)))
    assert refused.value.dimension is Dimension.ACTOR


@given(data=st.data(), k=st.integers(1, 30))
def test_remaining_budget_is_the_bound(data: st.DataObject, k: int) -> None:
    """A child may reserve only what remains, and the remainder may not exceed the parent."""
    parent = data.draw(parents())
    request = data.draw(valid_requests(parent))
    used = request.handoff.budget
    remaining = used.model_copy(update={"actions": max(used.actions - 1, 0)})
    if used.actions > 0:
        with pytest.raises(NarrowingError) as refused:
            narrow(parent, request, remaining=remaining)
        assert refused.value.dimension is Dimension.ACTIONS
    inflated = parent.handoff.budget.model_copy(
        update={"context_units": parent.handoff.budget.context_units + k}
    )
    with pytest.raises(NarrowingError) as refused:
        narrow(parent, request, remaining=inflated)
    assert refused.value.dimension is Dimension.CONTEXT_UNITS


ClaimsMutation = Callable[[dict[str, Any], Grant, int], None]


def _set(path: str, value: Callable[[Grant, int], Any]) -> ClaimsMutation:
    *parents_path, last = path.split(".")

    def mutate(claims: dict[str, Any], parent: Grant, k: int) -> None:
        target = claims
        for name in parents_path:
            target = target[name]
        target[last] = value(parent, k)

    return mutate


def _drop(path: str) -> ClaimsMutation:
    *parents_path, last = path.split(".")

    def mutate(claims: dict[str, Any], parent: Grant, k: int) -> None:
        target = claims
        for name in parents_path:
            target = target[name]
        del target[last]

    return mutate


CHILD_WIDENINGS: list[tuple[Dimension, ClaimsMutation]] = [
    (Dimension.SUBJECT, _set("sub", lambda p, k: "mallory")),
    (Dimension.TENANT, _set("tenant", lambda p, k: "tenant-b")),
    (Dimension.AUDIENCE, _set("aud", lambda p, k: ["remote-risk", "other"])),
    (Dimension.SCOPE, _set("scope", lambda p, k: "admin:all")),
    (Dimension.ISSUED_AT, _set("iat", lambda p, k: p.iat - k)),
    (Dimension.NOT_BEFORE, _set("nbf", lambda p, k: p.nbf - k)),
    (Dimension.EXPIRY, _set("exp", lambda p, k: p.exp + k)),
    (Dimension.EXPIRY, _set("exp", lambda p, k: str(p.exp))),
    (Dimension.ACTOR, _set("act", lambda p, k: {"sub": "remote-risk"})),
    (Dimension.FINAL_OWNER, _set("handoff.final_owner", lambda p, k: "someone-else")),
    (Dimension.ACTIONS, _set("handoff.budget.actions", lambda p, k: p.handoff.budget.actions + k)),
    (
        Dimension.CONTEXT_UNITS,
        _set("handoff.budget.context_units", lambda p, k: p.handoff.budget.context_units + k),
    ),
    (Dimension.EFFECTS, _set("handoff.budget.effects", lambda p, k: p.handoff.budget.effects + k)),
    # A claim the child lacks counts as wider, never as unrestricted.
    (Dimension.SUBJECT, _drop("sub")),
    (Dimension.TENANT, _drop("tenant")),
    (Dimension.AUDIENCE, _drop("aud")),
    (Dimension.SCOPE, _drop("scope")),
    (Dimension.ISSUED_AT, _drop("iat")),
    (Dimension.NOT_BEFORE, _drop("nbf")),
    (Dimension.EXPIRY, _drop("exp")),
    (Dimension.ACTOR, _drop("act")),
    (Dimension.FINAL_OWNER, _drop("handoff.final_owner")),
    (Dimension.ACTIONS, _drop("handoff.budget")),
]


@given(
    data=st.data(),
    case=st.sampled_from(CHILD_WIDENINGS),
    k=st.integers(1, 30),
)
def test_predicate_names_the_widened_dimension(
    data: st.DataObject, case: tuple[Dimension, ClaimsMutation], k: int
) -> None:
    """Widening or dropping one claim of a valid child makes the predicate name that dimension."""
    dimension, mutate = case
    parent = data.draw(parents(max_depth=DEFAULT_MAX_ACT_DEPTH - 1)).model_copy(
        update={"act": _chain(1)}
    )
    child = narrow(parent, data.draw(valid_requests(parent)))
    claims = copy.deepcopy(child.claims())
    mutate(claims, parent, k)
    assert widened_dimension(claims, parent) is dimension
    assert not is_narrower_or_equal(claims, parent)


@given(parent=parents())
def test_a_grant_is_narrower_or_equal_to_itself(parent: Grant) -> None:
    """Equality is allowed: every grant is narrower-or-equal to itself."""
    assert is_narrower_or_equal(parent, parent)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("exp", "1796000000"),
        ("exp", True),
        ("exp", 1.5),
        ("aud", ["remote-risk"]),
        ("sub", 42),
        ("tenant", "\uff54-\uff41\uff43\uff4d\uff45"),  # fullwidth "t-acme"
        ("scope", "risk:read  risk:write"),
        ("scope", ""),
        ("jti", "x\u0000y"),
    ],
)
def test_grant_model_is_strict(field: str, value: Any) -> None:
    """Claims of the wrong JSON type or outside the ASCII identifier grammar do not parse."""
    claims = _valid_grant().claims()
    claims[field] = value
    with pytest.raises(ValidationError):
        Grant.model_validate(claims)


def test_grant_model_refuses_unknown_claims() -> None:
    """A claim the profile does not define is refused rather than silently dropped."""
    with pytest.raises(ValidationError):
        Grant.model_validate({**_valid_grant().claims(), "admin": True})


def test_claims_digest_is_stable_across_member_order() -> None:
    """The audit digest depends on the claims, not on the order their members arrive in."""
    claims = _valid_grant().claims()
    reordered = dict(reversed(list(claims.items())))
    assert claims_digest(claims) == claims_digest(reordered) == claims_digest(_valid_grant())
    assert claims_digest(claims).startswith("sha256:")


def _valid_grant() -> Grant:
    return Grant(
        iss="coordinator",
        sub="alice",
        aud="remote-risk",
        iat=T0,
        nbf=T0,
        exp=T0 + 300,
        jti="j-1",
        scope="risk:read",
        tenant="tenant-a",
        handoff=_handoff(Budget(actions=1, context_units=10, effects=0)),
        act=Actor(sub="remote-risk"),
    )
