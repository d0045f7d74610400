"""Delegation tokens for load runs: one fresh token per request, bound to its handoff.

The claims are what the coordinator's :class:`~coordinator.authority.delegator.Delegator` mints for
a risk handoff (read-only, effects 0, the skill's scope, a five-minute life), signed by
:func:`coordinator.authority.tokens.mint_token`. Tokens are minted ahead of each measured window so
that signing does not compete with sending on the load core.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from typing import Any

from agent_cards.keys import KeySet, SigningKey, load_key_set
from coordinator.assessment.scenario import CONTEXT_KEYS, context_for
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.tokens import mint_token
from coordinator.ids import new_jti

RISK_SCOPE = "risk:interpret"
_PAYLOAD = {key: value for key, value in context_for("ok").items() if key in CONTEXT_KEYS["risk"]}


def risk_payload() -> dict[str, Any]:
    """The context the coordinator projects for the risk specialist (brief, policy note)."""
    return _PAYLOAD


def delegation_claims(audience: str, handoff_id: str, *, now: int | None = None) -> dict[str, Any]:
    now = int(time.time()) if now is None else now
    return {
        "iss": DEFAULT_ISSUER,
        "sub": "operator",
        "aud": audience,
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "jti": new_jti(),  # as the coordinator names them: time-ordered
        "act": {"sub": DEFAULT_ISSUER},
        "scope": RISK_SCOPE,
        "tenant": "default",
        "handoff": {
            "id": handoff_id,
            "attempt": 1,
            "duplicate_key": f"bench:{handoff_id}",
            "state_ref": {"id": "bench", "version": 0},
            "final_owner": "operator",
            "budget": {"actions": 1, "context_units": 1000, "effects": 0},
        },
    }


class TokenMinter:
    """Tokens for handoffs named ``tok-<run>-N``: minted ahead, handed out in order."""

    def __init__(self, key: SigningKey, audience: str) -> None:
        self.key = key
        self.audience = audience
        self._ready: deque[tuple[str, str]] = deque()
        self._minted = itertools.count(1)
        self._run = f"{time.time_ns():x}"

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str], audience: str) -> TokenMinter:
        return cls(load_key_set(directory).active, audience)

    @classmethod
    def generated(cls, audience: str) -> tuple[TokenMinter, KeySet]:
        keys = KeySet(active=SigningKey.generate())
        return cls(keys.active, audience), keys

    def mint(self, handoff_id: str) -> str:
        return mint_token(delegation_claims(self.audience, handoff_id), self.key)

    def fill(self, count: int) -> None:
        """Have ``count`` tokens ready, each for a handoff of its own."""
        while len(self._ready) < count:
            handoff_id = f"tok-{self._run}-{next(self._minted)}"
            self._ready.append((handoff_id, self.mint(handoff_id)))

    def take(self) -> tuple[str, str, int]:
        """``(handoff_id, token, minted_now)``: the next ready token, else one minted now."""
        if self._ready:
            handoff_id, token = self._ready.popleft()
            return handoff_id, token, 0
        handoff_id = f"tok-{self._run}-{next(self._minted)}"
        return handoff_id, self.mint(handoff_id), 1
