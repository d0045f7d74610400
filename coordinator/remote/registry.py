"""The registry of remote specialists: fetch a card, verify who signed it, validate it, keep it.

A card is accepted only if

* at least one of its signatures verifies with a key the operator pinned: a key file
  (``--trust-key``), one kid looked up in the service's JWK Set on the card's own origin
  (``--expect-kid``), the keys pinned at an earlier registration, or, only when asked for
  explicitly and recorded as such, whatever keys the origin serves now (trust on first
  use). A ``jku`` in a card never chooses the trust root;
* it is an A2A v1.0 card with a JSON-RPC interface at protocol version 1.x and, when the
  caller names one, declares the expected skill.

Nothing is stored before verification succeeds. When a registered card changes in what it
asks for (skills, scopes, security requirements, interfaces), the new version is held as
pending until an operator approves it; a change that only narrows is adopted at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from agent_cards.keys import KID_NOT_THUMBPRINT, KeyMaterialError, TrustedKeys
from agent_cards.signing import CardVerificationError, verify_card
from contracts import strict_json
from contracts.returns import ReturnContract, held_for_review
from contracts.wire import AgentCard, AgentInterface
from coordinator.audit.trail import AuditTrail
from coordinator.errors import FederationError, ProtocolError, RegistryError
from coordinator.remote.client import A2AClient, FetchedCard
from coordinator.storage.datadir import DataDir
from coordinator.storage.runs import RunStore

AGENTS_FILE = "agents.json"
JWKS_PATH = "/.well-known/jwks.json"
TrustKind = Literal["pinned_key", "pinned_kid", "trust_on_first_use"]
Status = Literal["registered", "unchanged", "updated", "narrowed", "approved", "pending_approval"]


class RegisteredAgent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    card_url: str
    endpoint: str
    card: dict[str, Any]
    etag: str | None = None
    registered_at: str
    trust: TrustKind = "pinned_key"
    pinned_jwks: dict[str, Any] = {}
    verified_kid: str | None = None
    pending_card: dict[str, Any] | None = None
    # The keys the held card was verified with, its kid and how they were trusted: what
    # ``register --approve`` verifies it with again, so the pins given stay the pins.
    pending_pins: dict[str, Any] | None = None
    pending_kid: str | None = None
    pending_trust: TrustKind | None = None
    # Return contracts the operator declared per skill at registration (--return-schema).
    return_contracts: dict[str, ReturnContract] = {}

    def return_contract_for(self, skill: str) -> ReturnContract:
        """The declared contract for ``skill``, else the default that admits nothing."""
        return self.return_contracts.get(skill) or held_for_review()

    @cached_property
    def agent_card(self) -> AgentCard:
        """The card as a model, validated once (the record is frozen)."""
        return AgentCard.model_validate(self.card)

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


def accepted_interface(card: AgentCard, expect_skill: str | None) -> AgentInterface:
    """The interface we will talk to, or a :class:`RegistryError` saying why there is none."""
    interface = card.jsonrpc_interface()
    if interface is None:
        raise RegistryError(
            f"card of {card.name!r} offers no JSONRPC interface at protocol version 1.0",
            "no_jsonrpc_v1_interface",
        )
    if expect_skill is not None and card.skill(expect_skill) is None:
        raise RegistryError(
            f"card of {card.name!r} does not declare skill {expect_skill!r}", "skill_missing"
        )
    return interface


# --- what a card asks for, and whether a new version only narrows it ----------------------


def surface(card: AgentCard) -> dict[str, Any]:
    """The parts of a card that decide what we would send it and what it may ask for."""
    return {
        "interfaces": {
            (i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces
        },
        "skills": {
            skill.id: frozenset(
                scope
                for requirement in skill.security_requirements or []
                for listed in requirement.schemes.values()
                for scope in listed.list
            )
            for skill in card.skills
        },
        "schemes": _canonical(card.security_schemes),
        "requirements": _canonical(card.security_requirements),
    }


def _canonical(value: Any) -> bytes:
    if value is None:
        return b"null"
    if isinstance(value, dict):
        value = {
            k: v.model_dump(mode="json", by_alias=True, exclude_none=True) for k, v in value.items()
        }
    else:
        value = [v.model_dump(mode="json", by_alias=True, exclude_none=True) for v in value]
    return strict_json.dumps(value)


def only_narrows(old: AgentCard, new: AgentCard) -> bool:
    before, after = surface(old), surface(new)
    return (
        after["schemes"] == before["schemes"]
        and after["requirements"] == before["requirements"]
        and after["interfaces"] <= before["interfaces"]
        and all(
            skill in before["skills"] and scopes <= before["skills"][skill]
            for skill, scopes in after["skills"].items()
        )
    )


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
    ) -> Registration:
        """Fetch, verify, validate and keep a card; every step is in the ledger on return.
        ``return_contracts`` (per skill) are kept with it, added to any declared before."""
        try:
            registration = await self._register(client, url, name, expect_skill, anchor, approve)
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
            kid = _verified(fetched, trusted)
            interface = accepted_interface(fetched.card, expect_skill)
        except RegistryError as exc:
            self.trail.emit("card.refused", data={**facts, "reason": exc.reason})
            raise
        self.trail.emit("card.verified", data={**facts, "kid": kid, "trust": kind})
        agent = RegisteredAgent(
            name=name,
            card_url=fetched.url,
            endpoint=interface.url,
            card=fetched.document,
            etag=fetched.etag,
            registered_at=now_text(),
            trust=kind,
            pinned_jwks=trusted.to_jwks(),
            verified_kid=kid,
        )
        status = _status(existing, agent, approve)
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
            agent = existing
        elif status == "pending_approval" and existing is not None:
            agent = existing.model_copy(
                update={
                    "pending_card": fetched.document,
                    "pending_pins": trusted.to_jwks(),
                    "pending_kid": kid,
                    "pending_trust": kind,
                }
            )
        self._save(agent)
        return Registration(agent, status)


def held_anchor(
    existing: RegisteredAgent | None, anchor: TrustAnchor, approve: bool
) -> TrustAnchor:
    """With ``--approve`` and no new anchor, the keys the held card was verified with
    (what the operator pinned when it was held), not the older card's."""
    if not approve or anchor.given or existing is None or not existing.pending_pins:
        return anchor
    return TrustAnchor(keys=_keys_from(existing.pending_pins), kind=existing.pending_trust)


def _verified(fetched: FetchedCard, trusted: TrustedKeys) -> str:
    try:
        return verify_card(fetched.document, trusted)
    except CardVerificationError as exc:
        raise RegistryError(f"card of {fetched.url} refused: {exc}", exc.reason) from None


def _digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(strict_json.dumps(document)).hexdigest()


def _status(existing: RegisteredAgent | None, new: RegisteredAgent, approve: bool) -> Status:
    if existing is None:
        return "registered"
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
        raise RegistryError(str(exc), reason) from None
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
        raise RegistryError(str(exc), "jwks_unavailable") from None
    return _keys_from(document)


def _keys_from(document: Any) -> TrustedKeys:
    """Keys whose kids are their computed thumbprints; a JWK labelled otherwise refuses the
    whole set (``kid_not_thumbprint``), since whoever wrote that label chose a key's name."""
    try:
        return TrustedKeys.from_json(document)
    except KeyMaterialError as exc:
        raise RegistryError(f"unusable key set: {exc}", key_reason(exc, "jwks_invalid")) from None
    except ValueError as exc:
        raise RegistryError(f"unusable key set: {exc}", "jwks_invalid") from None


def key_reason(exc: KeyMaterialError, otherwise: str) -> str:
    """The reason code for refused key material: a kid mismatch keeps its own code."""
    return KID_NOT_THUMBPRINT if exc.reason == KID_NOT_THUMBPRINT else otherwise
