"""The registry of remote specialists: fetch a card, verify who signed it, validate it, keep it.

A card is accepted only if

* at least one of its signatures verifies with a key the operator pinned: a key file
  (``--trust-key``), one kid looked up in the service's JWK Set on the card's own origin
  (``--expect-kid``), the keys pinned at an earlier registration, or, only when asked for
  explicitly and recorded as such, whatever keys the origin serves now (trust on first
  use). A ``jku`` in a card never chooses the trust root;
* it offers an interface we speak (JSON-RPC, HTTP+JSON or gRPC at protocol version 1.x,
  or JSON-RPC at 0.3; the first the card lists of those is the one used, see
  :func:`~coordinator.remote.wire.transport.choose_interface`) and, when the caller names one,
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
from datetime import UTC, datetime
from typing import Any

from agent_cards.identity import identity_of
from agent_cards.keys import TrustedKeys
from agent_cards.signing import VerifiedCard
from agent_cards.transparency.succession import followed, successions_in
from contracts import strict_json
from contracts.returns import ReturnContract
from coordinator.audit.trail import AuditTrail
from coordinator.errors import FederationError, ProtocolError, RegistryError
from coordinator.remote.cards.card_verification import (
    keys_from,
    trusted_key,
    verified_card,
    verified_kid,
)
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registration import Registration, status_of
from coordinator.remote.cards.trust_anchor import (
    JWKS_PATH,
    TrustAnchor,
    bounded,
    held_anchor,
    origin_of,
    trust_for,
)
from coordinator.remote.wire.bindings import transport_for
from coordinator.remote.wire.client import A2AClient, FetchedCard
from coordinator.remote.wire.destinations import Destinations, Neighbour, allowances
from coordinator.remote.wire.destinations import check_card_resolved as check_card
from coordinator.remote.wire.transport import accepted_interface
from coordinator.remote.wire.v03.card import card_model
from coordinator.storage.datadir import DataDir
from coordinator.storage.runs import RunStore

AGENTS_FILE = "agents.json"
# The request headers (a delegation token) an agent's extended card is fetched with.
CardCaller = Callable[[RegisteredAgent], Mapping[str, str]]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"


def now_text() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


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
        """Store ``agent`` as it now is (an adopted key: see
        :mod:`coordinator.remote.cards.key_succession`)."""
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
        decision, see :mod:`coordinator.remote.wire.destinations`)."""
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
            trusted, kind = await trust_for(client, fetched, anchor or TrustAnchor(), existing)
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
        status = status_of(existing, agent, approve, pinned or kind == "trust_on_first_use")
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
        kid = verified_kid(document, keys_from(agent.pinned_jwks), what)
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


async def _followed(
    client: A2AClient, fetched: FetchedCard, pinned: TrustedKeys
) -> tuple[TrustedKeys, list[str]]:
    """``pinned``, and when the card is signed by none of them, the successors the
    origin's JWK Set vouches for with them (coordinator.remote.cards.key_succession)."""
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


def _digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(strict_json.dumps(document)).hexdigest()


async def _fetch(client: A2AClient, url: str) -> FetchedCard:
    try:
        return await client.fetch_card(url)
    except ProtocolError as exc:
        reason = "card_not_json" if exc.reason == "not_json" else "card_invalid"
        raise RegistryError(str(exc), bounded(exc.reason, reason)) from None
    except FederationError as exc:
        raise RegistryError(str(exc), "card_unreachable") from None
