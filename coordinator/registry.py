"""The registry of remote specialists: fetch a card, validate it, keep it.

A card is accepted only if it is an A2A v1.0 card with a JSON-RPC interface at protocol
version 1.x and, when the caller says which skill it expects, declares that skill.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from contracts.wire import AgentCard, AgentInterface
from coordinator.client import A2AClient
from coordinator.datadir import DataDir
from coordinator.errors import FederationError, ProtocolError, RegistryError

AGENTS_FILE = "agents.json"


class RegisteredAgent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    card_url: str
    endpoint: str
    card: dict[str, Any]
    etag: str | None = None
    registered_at: str

    @property
    def agent_card(self) -> AgentCard:
        return AgentCard.model_validate(self.card)

    def skill_ids(self) -> list[str]:
        return [skill.id for skill in self.agent_card.skills]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"


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


class Registry:
    def __init__(self, data: DataDir) -> None:
        self.data = data

    def agents(self) -> list[RegisteredAgent]:
        stored = self.data.read_json(AGENTS_FILE, default={})
        return [RegisteredAgent.model_validate(entry) for entry in stored.values()]

    def get(self, name: str) -> RegisteredAgent:
        stored = self.data.read_json(AGENTS_FILE, default={})
        if name not in stored:
            known = ", ".join(sorted(stored)) or "none"
            raise RegistryError(
                f"no agent named {name!r} is registered (known: {known})", "unknown_agent"
            )
        return RegisteredAgent.model_validate(stored[name])

    async def register(
        self,
        client: A2AClient,
        url: str,
        name: str | None = None,
        expect_skill: str | None = None,
    ) -> RegisteredAgent:
        try:
            fetched = await client.fetch_card(url)
        except ProtocolError as exc:
            raise RegistryError(
                str(exc), "card_not_json" if exc.reason == "not_json" else "card_invalid"
            ) from None
        except FederationError as exc:
            raise RegistryError(str(exc), "card_unreachable") from None
        interface = accepted_interface(fetched.card, expect_skill)
        agent = RegisteredAgent(
            name=name or slug(fetched.card.name),
            card_url=fetched.url,
            endpoint=interface.url,
            card=fetched.document,
            etag=fetched.etag,
            registered_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        )
        stored = self.data.read_json(AGENTS_FILE, default={})
        stored[agent.name] = agent.model_dump(mode="json")
        self.data.write_json(stored, AGENTS_FILE)
        return agent
