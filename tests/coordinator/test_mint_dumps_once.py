"""A minted grant's claims are dumped once for its token and its digest (issue 34): the
token signs, and the ``claims_digest`` the ledger, the grant row and the credentials
record covers, the same claims; the token still verifies to exactly that digest."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_cards.keys import KeySet, SigningKey, b64url_decode
from contracts import strict_json
from contracts.grant import Grant, claims_digest
from contracts.handoff import HandoffBudget, HandoffRecord
from coordinator.authority.delegator import Delegator, RunAuthority

SCOPES = frozenset({"risk:interpret"})


def record(run_id: str) -> HandoffRecord:
    budget = HandoffBudget(actions=1, context_units=4000, effects=0, model_requests=1)
    return HandoffRecord(
        handoff_id="ho-1", run_id=run_id, source="coordinator", target="remote-risk",
        skill="risk.interpret", final_owner="coordinator", budget=budget,
        lease_expires_at=datetime.now(UTC) + timedelta(seconds=60),
        duplicate_key=f"{run_id}:ho-1",
    )  # fmt: skip


def test_a_mint_dumps_its_grant_once(monkeypatch: pytest.MonkeyPatch) -> None:
    delegator = Delegator(KeySet(active=SigningKey.generate()), RunAuthority(), run_id="run-a")
    dumps: list[int] = []
    original: Callable[..., Any] = Grant.model_dump

    def counted(self: Grant, *args: Any, **kwargs: Any) -> Any:
        dumps.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Grant, "model_dump", counted)
    minted = delegator.mint(
        record("run-a"),
        "urn:agent",
        SCOPES,
        remaining=delegator.root.handoff.budget,
        message={"role": "ROLE_USER", "parts": [{"text": "hi"}]},
    )
    summary = minted.summary()
    # one for the token and its digest: binding the request's digest dumps nothing
    assert len(dumps) == 1
    monkeypatch.undo()
    signed = strict_json.loads(b64url_decode(minted.token.split(".")[1]))
    assert signed == minted.grant.claims()
    assert summary["claims_digest"] == claims_digest(minted.grant) == claims_digest(signed)
