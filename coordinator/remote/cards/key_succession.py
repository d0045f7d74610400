"""An agent's next key, adopted because a key pinned for it vouches for it.

An agent that rotates its card key announces the next one first, in key-succession
statements signed by the key it is pinned by (:mod:`agent_cards.transparency.succession`):
on its JWK Set, and with every receipt while a rotation is under way. A statement that
verifies with a pinned key, in that key's own name, is the agent speaking for itself, so
the successor it names is pinned too, without operator action, and becomes the agent's
identity: the audience of the next tokens minted for it. A new key that no pinned key
vouches for is never adopted here; it is held for the operator like any other new
anchor (:mod:`coordinator.remote.cards.registry`).

Every adoption is an ``agent.key_succeeded`` event in the ledger, with the statements
followed; the agent keeps them (``successions``) for the proof bundles of its runs, so an
auditor holding only the key it pinned first can follow them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_cards.keys import KeyMaterialError, TrustedKeys
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.transparency.succession import followed, verify_succession
from coordinator.errors import RegistryError
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry

SUCCEEDED_EVENT = "agent.key_succeeded"


def succeeded(agent: RegisteredAgent, statements: Iterable[Any]) -> RegisteredAgent | None:
    """``agent`` with every key ``statements`` lead to from its pinned keys pinned as well,
    and the last of them its identity; None when they lead to no key not pinned yet."""
    pinned = _pinned(agent)
    keys, used = followed(pinned, statements)
    if len(keys) == len(pinned):
        return None
    newest = verify_succession(used[-1], keys)
    kept = (*agent.successions, *(jws for jws in used if jws not in agent.successions))
    return agent.model_copy(
        update={"pinned_jwks": keys.to_jwks(), "verified_kid": newest.kid, "successions": kept}
    )


def follow(registry: Registry, name: str, statements: Iterable[Any]) -> RegisteredAgent | None:
    """Adopt the keys ``statements`` vouch for, for the agent registered as ``name``, and
    record it; None (nothing recorded) when they vouch for nothing new."""
    try:
        agent = registry.get(name)
        adopted = succeeded(agent, statements)
    except (RegistryError, StatementInvalid, KeyMaterialError):
        return None
    if adopted is None:
        return None
    registry.keep(adopted)
    registry.trail.emit(
        SUCCEEDED_EVENT,
        data={
            "agent": name,
            "from_kid": agent.verified_kid,
            "kid": adopted.verified_kid,
            "statements": [s for s in adopted.successions if s not in agent.successions],
        },
    )
    registry.trail.flush()
    return adopted


def _pinned(agent: RegisteredAgent) -> TrustedKeys:
    return TrustedKeys.from_json(agent.pinned_jwks) if agent.pinned_jwks else TrustedKeys()
