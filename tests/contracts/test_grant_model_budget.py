"""The model budget is a grant dimension: a child carves it from what the parent has left."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.grant import (
    Budget,
    DelegationRequest,
    Dimension,
    Grant,
    Handoff,
    NarrowingError,
    SkillAuthority,
    StateRef,
    narrow,
    widened_dimension,
)

NOW = 1_700_000_000


def budget(**model: int | None) -> Budget:
    return Budget(actions=2, context_units=100, effects=0, **model)


def handoff(spend: Budget) -> Handoff:
    return Handoff(
        id="h-1",
        attempt=1,
        duplicate_key="k-1",
        state_ref=StateRef(id="run-1", version=0),
        final_owner="coordinator",
        budget=spend,
    )


def parent(spend: Budget) -> Grant:
    return Grant(
        iss="coordinator",
        sub="alice",
        aud="coordinator",
        iat=NOW,
        nbf=NOW,
        exp=NOW + 600,
        jti="root-1",
        scope="risk:interpret",
        tenant="t",
        handoff=handoff(spend),
    )


def request(spend: Budget) -> DelegationRequest:
    return DelegationRequest(
        issuer="coordinator",
        audience="remote-risk",
        skill=SkillAuthority(id="risk", scopes=frozenset({"risk:interpret"}), read_only=True),
        scope="risk:interpret",
        handoff=handoff(spend),
        jti="jti-1",
        issued_at=NOW + 1,
        expires_at=NOW + 60,
    )


def test_a_child_with_more_model_requests_than_left_is_refused() -> None:
    """The run has 3 model requests, 1 left: a child asking 2 is refused on that dimension."""
    with pytest.raises(NarrowingError) as refused:
        narrow(
            parent(budget(model_requests=3)),
            request(budget(model_requests=2)),
            remaining=budget(model_requests=1),
        )
    assert refused.value.dimension is Dimension.MODEL_REQUESTS


def test_a_child_naming_no_model_limit_under_a_parent_that_has_one_is_wider() -> None:
    """A missing model-request claim means unlimited, so it widens a limited parent."""
    with pytest.raises(NarrowingError) as refused:
        narrow(parent(budget(model_requests=3)), request(budget()))
    assert refused.value.dimension is Dimension.MODEL_REQUESTS


def test_model_tokens_narrow_like_requests() -> None:
    spend = budget(model_requests=1, model_tokens=500)
    with pytest.raises(NarrowingError) as refused:
        narrow(parent(spend), request(budget(model_requests=1, model_tokens=501)))
    assert refused.value.dimension is Dimension.MODEL_TOKENS


def test_a_child_within_the_model_budget_carries_it() -> None:
    child = narrow(parent(budget(model_requests=3)), request(budget(model_requests=1)))
    assert child.handoff.budget.model_requests == 1
    assert child.claims()["handoff"]["budget"]["model_requests"] == 1


def test_a_parent_without_a_model_limit_leaves_the_child_free_to_name_one() -> None:
    child = narrow(parent(budget()), request(budget(model_requests=5)))
    assert child.handoff.budget.model_requests == 5
    assert widened_dimension(narrow(parent(budget()), request(budget())), parent(budget())) is None


def _raw_budget(claims: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    return {**claims, "handoff": {**claims["handoff"], "budget": value}}


@pytest.mark.parametrize(
    "model_claim",
    [
        {},  # missing: wider
        {"model_requests": 4},  # more than the parent
        {"model_requests": "1"},  # not a count
        {"model_requests": -1},
        {"model_requests": True},
        {"model_requests": None},
    ],
)
def test_raw_claims_with_a_widened_model_budget_name_the_dimension(
    model_claim: dict[str, Any],
) -> None:
    limited = parent(budget(model_requests=3))
    child = narrow(limited, request(budget(model_requests=1))).claims()
    raw = _raw_budget(child, {"actions": 1, "context_units": 10, "effects": 0, **model_claim})
    assert widened_dimension(raw, limited) is Dimension.MODEL_REQUESTS
