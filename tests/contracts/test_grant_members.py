"""A member added to a narrowed grant is validated as the whole grant would validate it.

``with_bindings`` and ``with_status`` check only the member they add (the rest of the
grant was validated when it was narrowed); what they accept and refuse must be exactly
what validating the grant's claims with that member would.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from contracts.grant import (
    Budget,
    Grant,
    Handoff,
    StateRef,
    with_bindings,
    with_status,
)

DIGEST = "sha-256:" + "A" * 43
HEAD = "eyJhbGciOiJFZERTQSJ9.eyJzaXplIjoxfQ.c2ln"
URI = "https://coordinator.example/status-lists/run-1/h-1"


def _grant() -> Grant:
    return Grant(
        iss="coordinator",
        sub="alice",
        aud="remote-risk",
        iat=1_796_000_000,
        nbf=1_796_000_000,
        exp=1_796_000_300,
        jti="j-1",
        scope="risk:read",
        tenant="tenant-a",
        handoff=Handoff(
            id="h-1",
            attempt=1,
            duplicate_key="h-1:key",
            state_ref=StateRef(id="run-1", version=0),
            final_owner="coordinator",
            budget=Budget(actions=1, context_units=10, effects=0),
        ),
    )


def _as_whole(grant: Grant, member: str, value: Any) -> dict[str, Any] | None:
    """The claims of ``grant`` with ``member`` validated together; None if refused."""
    try:
        return Grant.model_validate({**grant.claims(), member: value}).claims()
    except ValidationError:
        return None


def _added(add: Any) -> dict[str, Any] | None:
    try:
        return add().claims()  # type: ignore[no-any-return]
    except ValidationError:
        return None


TEXTS = [DIGEST, HEAD, "", "sha-256:short", "a.b", "a.b.c.d", "x" * 3000, 5, True, b"a.b.c"]


@pytest.mark.parametrize("value", TEXTS)
def test_a_binding_is_validated_as_the_grant_validates_it(value: Any) -> None:
    grant = _grant()
    assert _added(lambda: with_bindings(grant, value, None)) == _as_whole(
        grant, "req_digest", value
    )
    assert _added(lambda: with_bindings(grant, None, value)) == _as_whole(grant, "log_head", value)


@pytest.mark.parametrize(
    ("uri", "idx"),
    [(URI, 0), (URI, 127), (URI, -1), (URI, "1"), (URI, 1.0), ("ftp://x", 1), ("", 1), (7, 1)],
)
def test_a_status_entry_is_validated_as_the_grant_validates_it(uri: Any, idx: Any) -> None:
    grant = _grant()
    whole = _as_whole(grant, "status", {"status_list": {"idx": idx, "uri": uri}})
    assert _added(lambda: with_status(grant, uri, idx)) == whole


def test_nothing_added_is_the_grant_itself() -> None:
    grant = _grant()
    assert with_bindings(grant, None, None) is grant
    both = with_bindings(grant, DIGEST, HEAD)
    assert (both.req_digest, both.log_head) == (DIGEST, HEAD)
    assert Grant.model_validate(both.claims()) == both
