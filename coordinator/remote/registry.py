"""The registry of remote specialists: fetch a card, verify who signed it, validate it, keep it.

A card is accepted only if

* at least one of its signatures verifies with a key the operator pinned: a key file
  (``--trust-key``), one kid looked up in the service's JWK Set on the card's own origin
  (``--expect-kid``), the keys pinned at an earlier registration, or, only when asked for
  explicitly and recorded as such, whatever keys the origin serves now (trust on first
  use). A ``jku`` in a card never chooses the trust root;
* it offers an interface we speak (JSON-RPC, HTTP+JSON or gRPC at protocol version 1.x,
  or JSON-RPC at 0.3; the first the card lists of those is the one used, see
  :func:`~coordinator.remote.transport.choose_interface`) and, when the caller names one,
  declares the expected skill. A v0.3 card (``url``, ``preferredTransport``) is read as
  the v1.0 card it describes; its signature may be in the form v0.3 signers used.

When the card declares ``capabilities.extendedAgentCard``, the extended card is fetched
right after (``GetExtendedAgentCard`` on the chosen interface, as an authenticated caller:
the ``caller`` gives the delegation token) and must verify with the same pinned keys;
one that does not refuses the registration with the verification's reason.

Nothing is stored before verification succeeds. When a registered card changes in what it
asks for (skills, scopes, security requirements, interfaces), the new version is held as
pending until an operator approves it; a change that only narrows is adopted at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict

from agent_cards.identity import identity_of
from agent_cards.keys import KID_NOT_THUMBPRINT, KeyMaterialError, TrustedKeys
from agent_cards.signing import (
    V03_FORMS,
    V1_FORMS,
    CardVerificationError,
    VerifiedCard,
    verify_card,
)
from agent_cards.transparency.succession import followed, successions_in
from agent_cards.trusted import VerificationKey
from contracts import strict_json
from contracts.model import Model
from contracts.returns import ReturnContract, held_for_review
from contracts.wire import AgentCard
from coordinator.audit.trail import AuditTrail
from coordinator.errors import FederationError, ProtocolError, RegistryError
from coordinator.remote.bindings import transport_for
from coordinator.remote.card_changes import only_narrows, surface
from coordinator.remote.client import A2AClient, FetchedCard
from coordinator.remote.destinations import Destinations, Neighbour, allowances
from coordinator.remote.destinations import check_card_resolved as check_card
from coordinator.remote.pinned import pinned_identity, pinned_key_set
from coordinator.remote.transport import JSONRPC, Interface, accepted_interface
from coordinator.remote.v03.card import card_model, is_v03_card
from coordinator.storage.datadir import DataDir
from coordinator.storage.runs import RunStore

AGENTS_FILE = "agents.json"
JWKS_PATH = "/.well-known/jwks.json"
# The request headers (a delegation token) an agent's extended card is fetched with.
CardCaller = Callable[["RegisteredAgent"], Mapping[str, str]]
TrustKind = Literal["pinned_key", "pinned_kid", "trust_on_first_use"]
Status = Literal["registered", "unchanged", "updated", "narrowed", "approved", "pending_approval"]


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
    # (--allow-origin), as ``host:port``; see coordinator.remote.destinations.
    allowed_origins: tuple[str, ...] = ()
    # The key-succession statements followed from the pinned keys to the agent's current
    # key (coordinator.remote.key_succession), oldest first: what a proof bundle carries.
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
        key = _keys_from(self.pinned_jwks).get(self.verified_kid or "")
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


@dataclass(frozen=True)
class TrustAnchor:
    """How the operator says which keys may sign this agent's card."""

    keys: TrustedKeys | None = None
    expect_kid: str | None = None
    trust_on_first_use: bool = False
    # How pinned ``keys`` came to be trusted (keys held with a pending card keep theirs).
    kind: TrustKind | None = None

    @property
    def given(self) -> bool:
        return self.keys is not None or self.expect_kid is not None or self.trust_on_first_use


@dataclass(frozen=True)
class Registration:
    agent: RegisteredAgent
    status: Status


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"


def now_text() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# --- the registry ---------------------------------------------------------------------------


class Registry:
    """Registered agents (the current card of each) in the data directory; with a run
    store, every version fetched is also kept there with its approval state and pins."""

    def __init__(
        self, data: DataDir, trail: AuditTrail | None = None, store: RunStore | None = None
    ) -> None:
        self.data = data
        self.trail = trail or AuditTrail(actor="operator")
        self.store = store

    def _stored(self) -> dict[str, Any]:
        stored = self.data.read_json(AGENTS_FILE, default={})
        return stored if isinstance(stored, dict) else {}

    def agents(self) -> list[RegisteredAgent]:
        return [RegisteredAgent.model_validate(entry) for entry in self._stored().values()]

    def get(self, name: str) -> RegisteredAgent:
        stored = self._stored()
        if name not in stored:
            known = ", ".join(sorted(stored)) or "none"
            raise RegistryError(
                f"no agent named {name!r} is registered (known: {known})", "unknown_agent"
            )
        return RegisteredAgent.model_validate(stored[name])

    def remove(self, name: str) -> RegisteredAgent:
        """Forget a registered agent (its card, pins, held card and return contracts);
        recorded in the ledger. Runs that used it keep their records."""
        agent = self.get(name)
        stored = self._stored()
        del stored[name]
        self.data.write_json(stored, AGENTS_FILE)
        self.trail.emit(
            "agent.removed",
            data={"agent": name, "card_url": agent.card_url, "verified_kid": agent.verified_kid},
        )
        self.trail.flush()
        return agent

    def refuse_pending(self, name: str) -> RegisteredAgent:
        """Drop the card held for approval; the registered card and its pins stay as
        they were. Recorded in the ledger with the held card's digest."""
        agent = self.get(name)
        if agent.pending_card is None:
            raise RegistryError(f"no card is held for {name!r}", "no_pending_card")
        kept = agent.model_copy(
            update={
                "pending_card": None,
                "pending_pins": None,
                "pending_kid": None,
                "pending_trust": None,
            }
        )
        self._save(kept)
        self.trail.emit(
            "card.refused_by_operator",
            data={
                "agent": name,
                "card_digest": _digest(agent.pending_card),
                "kid": agent.pending_kid,
            },
        )
        self.trail.flush()
        return kept

    def _others(self, name: str, identity: str) -> list[Neighbour]:
        """Every other registered agent (neither ``name`` nor the same ``identity``
        under another name): what its card may not point at."""
        others = (agent.neighbour() for agent in self.agents() if agent.name != name)
        return [other for other in others if other.identity != identity]

    def keep(self, agent: RegisteredAgent) -> None:
        """Store ``agent`` as it now is (an adopted key: coordinator.remote.key_succession)."""
        self._save(agent)

    def _save(self, agent: RegisteredAgent) -> None:
        stored = self._stored()
        # A new version of the card keeps the return contracts declared for its skills.
        kept = stored.get(agent.name, {}).get("return_contracts", {})
        document = agent.model_dump(mode="json")
        document["return_contracts"] = {**kept, **document["return_contracts"]}
        stored[agent.name] = document
        self.data.write_json(stored, AGENTS_FILE)

    async def register(
        self,
        client: A2AClient,
        url: str,
        name: str | None = None,
        expect_skill: str | None = None,
        anchor: TrustAnchor | None = None,
        approve: bool = False,
        return_contracts: Mapping[str, ReturnContract] | None = None,
        caller: CardCaller | None = None,
        allow_origins: Sequence[str] = (),
        take_address_from: str | None = None,
    ) -> Registration:
        """Fetch, verify, validate and keep a card; every step is in the ledger on return.
        ``return_contracts`` (per skill) are kept with it, added to any declared before;
        ``caller`` authenticates the fetch of an extended card; ``allow_origins`` are
        origins besides the card's own its interfaces may be on (kept with the agent,
        added to those allowed before); ``take_address_from`` names the registered agent
        whose address the card may name, which then leaves the registry (the operator's
        decision, see :mod:`coordinator.remote.destinations`)."""
        try:
            registration = await self._register(
                client, url, name, expect_skill, anchor, approve, caller, allow_origins,
                take_address_from,
            )  # fmt: skip
            if return_contracts:
                self._declare(registration.agent, return_contracts)
            # As stored: with the return contracts declared now and before.
            return Registration(self.get(registration.agent.name), registration.status)
        finally:
            self.trail.flush()

    def _declare(self, agent: RegisteredAgent, contracts: Mapping[str, ReturnContract]) -> None:
        unknown = sorted(set(contracts) - set(agent.skill_ids()))
        if unknown:
            raise RegistryError(
                f"card of {agent.name!r} declares no skill {', '.join(unknown)}; "
                "a return contract names one of its skills",
                "return_contract_unknown_skill",
            )
        declared = {k: c.declared_by("registration") for k, c in contracts.items()}
        self._save(self.get(agent.name).model_copy(update={"return_contracts": declared}))
        for skill, contract in declared.items():
            self.trail.emit(
                "return_contract.declared",
                data={"agent": agent.name, "skill": skill, **contract.summary()},
            )

    async def _register(
        self,
        client: A2AClient,
        url: str,
        name: str | None = None,
        expect_skill: str | None = None,
        anchor: TrustAnchor | None = None,
        approve: bool = False,
        caller: CardCaller | None = None,
        allow_origins: Sequence[str] = (),
        ceding: str | None = None,
    ) -> Registration:
        try:
            fetched = await _fetch(client, url)
        except RegistryError as exc:
            self.trail.emit("card.refused", data={"url": url, "reason": exc.reason})
            raise
        name = name or slug(fetched.card.name)
        facts = {"agent": name, "url": fetched.url, "etag": fetched.etag}
        self.trail.emit("card.fetched", data=facts)
        existing = self.get(name) if name in self._stored() else None
        anchor = held_anchor(existing, anchor or TrustAnchor(), approve)
        # An approval is of the card that was held: a card changed again is held anew.
        held = existing.pending_card if existing is not None else None
        approve = approve and (held is None or held == fetched.document)
        try:
            trusted, kind = await _trust_for(client, fetched, anchor or TrustAnchor(), existing)
            pinned = existing is not None and not (anchor and anchor.given)
            trusted, vouched = (
                await _followed(client, fetched, trusted) if pinned else (trusted, [])
            )
            signed = _verified(fetched, trusted)
            kid = signed.kid
            interface = accepted_interface(fetched.card, expect_skill)
            allowed = allowances(existing.allowed_origins if existing else (), allow_origins)
            others = self._others(name, identity_of(trusted_key(trusted, kid)))
            places = Destinations(fetched.url, allowed)
            ceded = await check_card(fetched.card, places, others, ceding)
        except RegistryError as exc:
            self.trail.emit("card.refused", data={**facts, "reason": exc.reason})
            raise
        verified = {"kid": kid, "form": signed.form, "trust": kind}
        self.trail.emit(
            "card.verified", data={**facts, **verified, "allowed_origins": list(allowed)}
        )
        agent = RegisteredAgent(
            name=name,
            card_url=fetched.url,
            endpoint=interface.url,
            binding=interface.binding,
            protocol_version=interface.protocol_version,
            tenant=interface.tenant,
            card=fetched.document,
            etag=fetched.etag,
            registered_at=now_text(),
            trust=kind,
            pinned_jwks=trusted.to_jwks(),
            verified_kid=kid,
            verified_form=signed.form,
            allowed_origins=allowed,
            successions=(*(existing.successions if existing else ()), *vouched),
        )
        try:
            agent = await self._with_extended(client, agent, caller, ceding)
        except RegistryError as exc:
            self.trail.emit("card.refused", data={**facts, "reason": exc.reason})
            raise
        status = _status(existing, agent, approve, pinned or kind == "trust_on_first_use")
        digest = _digest(fetched.document)
        self.trail.emit(f"card.{status}", data={**facts, "card_digest": digest})
        if self.store is not None and status != "unchanged":
            self.store.add(
                "card_versions",
                {
                    "agent": name,
                    "status": status,
                    "card": strict_json.dumps(fetched.document).decode(),
                    "card_digest": digest,
                    "verified_kid": kid,
                    "trust": kind,
                    "pinned_jwks": strict_json.dumps(trusted.to_jwks()).decode(),
                    "recorded_at": now_text(),
                },
            )
        if status == "unchanged" and existing is not None:
            agent = existing.model_copy(update={"allowed_origins": allowed})
        elif status == "pending_approval" and existing is not None:
            agent = existing.model_copy(
                update={
                    "allowed_origins": allowed,
                    "pending_card": fetched.document,
                    "pending_pins": trusted.to_jwks(),
                    "pending_kid": kid,
                    "pending_trust": kind,
                }
            )
        self._save(agent)
        if ceded is not None:
            self.trail.emit("agent.address_taken", data={"agent": ceded.name, "by": name})
            self.remove(ceded.name)
        return Registration(agent, status)

    async def _with_extended(
        self,
        client: A2AClient,
        agent: RegisteredAgent,
        caller: CardCaller | None,
        ceding: str | None,
    ) -> RegisteredAgent:
        """``agent`` with its extended card, fetched and verified, when its card has one."""
        if not agent.agent_card.capabilities.extended_agent_card:
            return agent
        what = f"extended card of {agent.name!r}"
        headers = caller(agent) if caller is not None else {}
        remote = transport_for(client, agent.interface, agent.destinations)
        try:
            document = await remote.extended_card(headers)
        except FederationError as exc:
            # Not evidence against the verified public card: kept without an extended one.
            self.trail.emit(
                "card.extended_unavailable", data={"agent": agent.name, "reason": exc.reason}
            )
            return agent
        kid = verified_kid(document, _keys_from(agent.pinned_jwks), what)
        try:
            extended = card_model(document)
        except ValueError as exc:
            raise RegistryError(f"{what} is not an agent card: {exc}", "card_invalid") from None
        others = self._others(agent.name, agent.agent_id)
        await check_card(extended, agent.destinations, others, ceding)
        self.trail.emit(
            "card.extended_verified",
            data={"agent": agent.name, "kid": kid, "card_digest": _digest(document)},
        )
        return agent.model_copy(update={"extended_card": document})


def trusted_key(trusted: TrustedKeys, kid: str) -> VerificationKey:
    """The pinned key whose computed kid verified a card."""
    key = trusted.get(kid)
    assert key is not None  # verify_card returns the kid of a key in ``trusted``
    return key


def held_anchor(
    existing: RegisteredAgent | None, anchor: TrustAnchor, approve: bool
) -> TrustAnchor:
    """With ``--approve`` and no new anchor, the keys the held card was verified with
    (what the operator pinned when it was held), not the older card's."""
    if not approve or anchor.given or existing is None or not existing.pending_pins:
        return anchor
    return TrustAnchor(keys=_keys_from(existing.pending_pins), kind=existing.pending_trust)


async def _followed(
    client: A2AClient, fetched: FetchedCard, pinned: TrustedKeys
) -> tuple[TrustedKeys, list[str]]:
    """``pinned``, and when the card is signed by none of them, the successors the
    origin's JWK Set vouches for with them (coordinator.remote.key_succession)."""
    try:
        _verified(fetched, pinned)
        return pinned, []
    except RegistryError:
        pass
    try:
        document = await client.fetch_json(origin_of(fetched.url) + JWKS_PATH, "JWK Set")
    except FederationError:
        return pinned, []
    return followed(pinned, successions_in(document if isinstance(document, dict) else None))


def _verified(fetched: FetchedCard, trusted: TrustedKeys) -> VerifiedCard:
    return verified_card(fetched.document, trusted, f"card of {fetched.url}")


def verified_kid(document: dict[str, Any], trusted: TrustedKeys, what: str) -> str:
    """The kid of a pinned key that signed ``document`` (see :func:`verified_card`)."""
    return verified_card(document, trusted, what).kid


def verified_card(document: dict[str, Any], trusted: TrustedKeys, what: str) -> VerifiedCard:
    """The pinned key that signed ``document`` and the form it signed (a v0.3 card may be
    signed in the v0.3 forms), or a :class:`RegistryError` with the verification's reason."""
    forms = V03_FORMS if is_v03_card(document) else V1_FORMS
    try:
        return verify_card(document, trusted, forms=forms)
    except CardVerificationError as exc:
        raise RegistryError(f"{what} refused: {exc}", exc.reason) from None


def _digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(strict_json.dumps(document)).hexdigest()


def _status(
    existing: RegisteredAgent | None, new: RegisteredAgent, approve: bool, pinned: bool
) -> Status:
    """What a registration does: a card verified by a key the operator gives anew (not a
    key pinned before, nor one a pinned key vouched for) is held like a wider card."""
    if existing is None:
        return "registered"
    if not pinned and new.verified_kid not in _keys_from(existing.pinned_jwks):
        return "approved" if approve else "pending_approval"
    if surface(existing.agent_card) == surface(new.agent_card):
        return "unchanged" if existing.card == new.card else "updated"
    if only_narrows(existing.agent_card, new.agent_card):
        return "narrowed"
    return "approved" if approve else "pending_approval"


async def _fetch(client: A2AClient, url: str) -> FetchedCard:
    try:
        return await client.fetch_card(url)
    except ProtocolError as exc:
        reason = "card_not_json" if exc.reason == "not_json" else "card_invalid"
        raise RegistryError(str(exc), _bounded(exc.reason, reason)) from None
    except FederationError as exc:
        raise RegistryError(str(exc), "card_unreachable") from None


async def _trust_for(
    client: A2AClient,
    fetched: FetchedCard,
    anchor: TrustAnchor,
    existing: RegisteredAgent | None,
) -> tuple[TrustedKeys, TrustKind]:
    """The keys this card must be signed with, and how they came to be trusted."""
    if anchor.keys is not None:
        return anchor.keys, anchor.kind or "pinned_key"
    if anchor.expect_kid is not None:
        # every kid in ``served`` is the thumbprint computed from its key, so this matches
        # the key itself, not a label the origin wrote next to it
        served = await _origin_keys(client, fetched.url)
        key = served.get(anchor.expect_kid)
        if key is None:
            raise RegistryError(
                f"kid {anchor.expect_kid!r} is not among the keys served by "
                f"{origin_of(fetched.url)}",
                "card_kid_unknown",
            )
        return TrustedKeys([key]), "pinned_kid"
    if existing is not None and existing.pinned_jwks.get("keys"):
        return _keys_from(existing.pinned_jwks), existing.trust
    if anchor.trust_on_first_use:
        return await _origin_keys(client, fetched.url), "trust_on_first_use"
    raise RegistryError(
        "no trust anchor: pin the signing key with --trust-key FILE or --expect-kid KID "
        "(or, for development only, --trust-on-first-use)",
        "no_trust_anchor",
    )


async def _origin_keys(client: A2AClient, card_url: str) -> TrustedKeys:
    """The JWK Set served on the card's own origin; never a URL the card names."""
    url = origin_of(card_url) + JWKS_PATH
    try:
        document = await client.fetch_json(url, "JWK Set")
    except FederationError as exc:
        raise RegistryError(str(exc), _bounded(exc.reason, "jwks_unavailable")) from None
    return _keys_from(document)


def _bounded(reason: str, otherwise: str) -> str:
    """A document refused by the bounded parser keeps that reason (``json_too_deep``,
    ``json_too_wide``)."""
    return reason if reason in (strict_json.JSON_TOO_DEEP, strict_json.JSON_TOO_WIDE) else otherwise


def _keys_from(document: Any) -> TrustedKeys:
    """Keys whose kids are their computed thumbprints; a JWK labelled otherwise refuses the
    whole set (``kid_not_thumbprint``), since whoever wrote that label chose a key's name."""
    try:
        if isinstance(document, Mapping):  # a stored pin: parsed once per key set
            return pinned_key_set(document)
        return TrustedKeys.from_json(document)
    except KeyMaterialError as exc:
        raise RegistryError(f"unusable key set: {exc}", key_reason(exc, "jwks_invalid")) from None
    except ValueError as exc:
        raise RegistryError(f"unusable key set: {exc}", "jwks_invalid") from None


def key_reason(exc: KeyMaterialError, otherwise: str) -> str:
    """The reason code for refused key material: a kid mismatch keeps its own code."""
    return KID_NOT_THUMBPRINT if exc.reason == KID_NOT_THUMBPRINT else otherwise
