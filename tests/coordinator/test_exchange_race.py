"""The write of a hop checks again, in its own transaction, what its parent has left and
whether its proof was used: another process of the owner on the same database may have
granted a sibling (or a hop on the same proof) between this process's check and write.

The race is set up deterministically: the sibling is written first, then this process
writes a hop it judged against the budget as it was before.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_cards.keys import KeySet, SigningKey
from contracts.grant import Actor, Budget, Grant, Handoff, ParentRef, StateRef
from coordinator.authority.exchange import TokenExchange
from coordinator.authority.holder_proof import ExchangeRefused
from coordinator.authority.hops import EXCHANGED, remaining_after_children
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace

RUN = "run-race"
OWNER = "urn:a2a-federation:coordinator"


def grant(jti: str, budget: Budget, parent: str | None = None) -> Grant:
    now = int(time.time())
    return Grant(
        iss=OWNER,
        sub=f"run:{RUN}",
        aud="urn:ietf:params:oauth:jwk-thumbprint:sha-256:" + "A" * 43,
        iat=now,
        nbf=now,
        exp=now + 60,
        jti=jti,
        scope="terms:check",
        tenant="default",
        handoff=Handoff(
            id=f"h-{jti}",
            attempt=1,
            duplicate_key=f"h-{jti}",
            state_ref=StateRef(id=RUN, version=0),
            final_owner="operator",
            budget=budget,
        ),
        act=Actor(sub=OWNER),
        parent=ParentRef(jti=parent, hash="sha-256:" + "B" * 43) if parent else None,
    )


def hop(parent: Grant, child: Grant, proof_jti: str) -> dict[str, object]:
    return {
        "parent_jti": parent.jti,
        "jti": child.jti,
        "budget": child.handoff.budget.model_dump(),
        "proof_jti": proof_jti,
    }


@pytest.fixture
def owner(tmp_path: Path) -> TokenExchange:
    ws = Workspace(DataDir(tmp_path / "data"))
    keys = KeySet(active=SigningKey.generate())
    return TokenExchange(ws, keys, OWNER, targets=lambda name: None, pinned_keys=lambda: [])


PARENT = grant("jti-parent", Budget(actions=2, context_units=100, effects=0))
HALF = Budget(actions=1, context_units=60, effects=0)


def test_a_sibling_written_meanwhile_leaves_too_little_and_nothing_is_written(
    owner: TokenExchange,
) -> None:
    first = grant("jti-first", HALF, PARENT.jti)
    second = grant("jti-second", HALF, PARENT.jti)
    owner.record_hop(RUN, PARENT, first, hop(PARENT, first, "proof-1"))  # the other process
    with pytest.raises(ExchangeRefused) as refused:
        owner.record_hop(RUN, PARENT, second, hop(PARENT, second, "proof-2"))
    assert (refused.value.status, refused.value.reason) == (403, "budget_exceeded")
    hops = [e for e in owner.ws.ledger().events(RUN) if e.event_type == EXCHANGED]
    assert [e.data["jti"] for e in hops] == ["jti-first"]
    with owner.ws.engine().connect() as connection:
        left = remaining_after_children(connection, PARENT, RUN)
    assert (left.actions, left.context_units) == (1, 40)


def test_a_hop_on_a_proof_another_process_granted_is_refused(owner: TokenExchange) -> None:
    small = Budget(actions=0, context_units=1, effects=0)
    first = grant("jti-first", small, PARENT.jti)
    second = grant("jti-second", small, PARENT.jti)
    owner.record_hop(RUN, PARENT, first, hop(PARENT, first, "proof-same"))
    with pytest.raises(ExchangeRefused) as refused:
        owner.record_hop(RUN, PARENT, second, hop(PARENT, second, "proof-same"))
    assert (refused.value.status, refused.value.reason) == (401, "proof_replayed")
