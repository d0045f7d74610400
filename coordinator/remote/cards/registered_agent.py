"""A registered agent: what the registry keeps of one remote specialist.

Its current card and the interface chosen from it, the keys pinned for it and which one
verified the card, a card held for the operator's approval, the return contracts and
extra origins the operator declared, and the key successions followed; its identity is
computed from the pinned key that verified its card (:attr:`RegisteredAgent.agent_id`).
Kept by :class:`coordinator.remote.cards.registry.Registry`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from pydantic import ConfigDict

from agent_cards.trusted import VerificationKey
from contracts.model import Model
from contracts.returns import ReturnContract, held_for_review
from contracts.wire import AgentCard
from coordinator.errors import RegistryError
from coordinator.remote.cards.card_verification import keys_from
from coordinator.remote.cards.pinned import pinned_identity
from coordinator.remote.wire.destinations import Destinations, Neighbour
from coordinator.remote.wire.transport import JSONRPC, Interface
from coordinator.remote.wire.v03.card import card_model

TrustKind = Literal["pinned_key", "pinned_kid", "trust_on_first_use"]


class RegisteredAgent(Model):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    card_url: str
    endpoint: str
    # The interface used, chosen from the card at registration (see choose_interface).
    binding: str = JSONRPC
    protocol_version: str = "1.0"
    tenant: str | None = None
    card: dict[str, Any]
    etag: str | None = None
    registered_at: str
    trust: TrustKind = "pinned_key"
    pinned_jwks: dict[str, Any] = {}
    verified_kid: str | None = None
    # The canonical form the card's signature verified over (agent_cards.signing).
    verified_form: str | None = None
    pending_card: dict[str, Any] | None = None
    # The keys the held card was verified with, its kid and how they were trusted: what
    # ``register --approve`` verifies it with again, so the pins given stay the pins.
    pending_pins: dict[str, Any] | None = None
    pending_kid: str | None = None
    pending_trust: TrustKind | None = None
    # The extended card (GetExtendedAgentCard), verified with the same pinned keys.
    extended_card: dict[str, Any] | None = None
    # Return contracts the operator declared per skill at registration (--return-schema).
    return_contracts: dict[str, ReturnContract] = {}
    # Origins besides the card's own that the operator allowed this agent's interfaces on
    # (--allow-origin), as ``host:port``; see coordinator.remote.wire.destinations.
    allowed_origins: tuple[str, ...] = ()
    # The key-succession statements followed from the pinned keys to the agent's current
    # key (coordinator.remote.cards.key_succession), oldest first: what a proof bundle carries.
    successions: tuple[str, ...] = ()

    def return_contract_for(self, skill: str) -> ReturnContract:
        """The declared contract for ``skill``, else the default that admits nothing."""
        return self.return_contracts.get(skill) or held_for_review()

    @cached_property
    def agent_card(self) -> AgentCard:
        """The card as a v1.0 model (a v0.3 card read as one), validated once."""
        return card_model(self.card)

    @property
    def interface(self) -> Interface:
        return Interface(self.endpoint, self.binding, self.protocol_version, self.tenant)

    @property
    def destinations(self) -> Destinations:
        """Where requests for this agent may go: its card's origin and the allowances."""
        return Destinations(self.card_url, self.allowed_origins)

    @property
    def agent_id(self) -> str:
        """The agent's identity, whichever binding is used: a delegation token's ``aud``.
        The RFC 9278 thumbprint URI of the pinned key that verified its card, computed
        from the key material (:mod:`agent_cards.identity`), never from a URL or a kid the
        card states; computed on every read, so agents stored before it work unchanged."""
        return pinned_identity(self._verified_key())

    @property
    def known_identity(self) -> str | None:
        """:attr:`agent_id`, or None for an agent stored before identities (no verified
        kid): it has to be registered again before any token is minted for it."""
        try:
            return self.agent_id
        except RegistryError:
            return None

    def _verified_key(self) -> VerificationKey:
        key = keys_from(self.pinned_jwks).get(self.verified_kid or "")
        if key is None:
            raise RegistryError(
                f"no pinned key of {self.name!r} verified its card; register it again",
                "agent_identity_unknown",
            )
        return key

    def neighbour(self) -> Neighbour:
        """What another card may not name: this agent's endpoints and origin."""
        offered = tuple(i.url for i in self.agent_card.supported_interfaces)
        endpoints = (self.endpoint, *offered)
        return Neighbour(self.name, self.card_url, endpoints, self.known_identity)

    def skill_ids(self) -> list[str]:
        return [skill.id for skill in self.agent_card.skills]
