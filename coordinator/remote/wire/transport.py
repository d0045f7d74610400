"""What the coordinator needs of a remote agent, whichever A2A binding carries it.

A :class:`Transport` is one interface of one agent (a URL, a binding, a protocol version,
a tenant): send, read back, cancel, stream, subscribe, and fetch the extended card. The
driver, the update follower and recovery call only this, so they never know whether the
agent speaks JSON-RPC, HTTP+JSON or gRPC, or is an A2A v0.3 agent. Every implementation
takes its limits, connection budget, token and trace propagation from the one
:class:`~coordinator.remote.wire.client.A2AClient` that made it.

:func:`choose_interface` picks the interface to use: the first of the card's
``supportedInterfaces``, in the card's order, whose binding and version we speak.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from contracts.wire import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)
from coordinator.errors import RegistryError

JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
GRPC = "GRPC"


@dataclass(frozen=True)
class Interface:
    """The interface a handoff is carried on, as the card declared it."""

    url: str
    binding: str = JSONRPC
    protocol_version: str = "1.0"
    tenant: str | None = None

    @property
    def legacy(self) -> bool:
        """An A2A v0.3 interface (its own method names, states and shapes)."""
        return is_v03(self.protocol_version)

    def summary(self) -> dict[str, Any]:
        """What the run document and the ledger say about the choice."""
        return {
            "binding": self.binding,
            "protocol_version": self.protocol_version,
            "url": self.url,
            "tenant": self.tenant,
        }


def is_v1(version: str) -> bool:
    return version == "1" or version.startswith("1.")


def is_v03(version: str) -> bool:
    return version == "0.3" or version.startswith("0.3.")


def speaks(binding: str, version: str) -> bool:
    """Whether this client speaks ``binding`` at protocol ``version``."""
    if is_v1(version):
        return binding in (JSONRPC, HTTP_JSON, GRPC)
    return is_v03(version) and binding == JSONRPC


def choose_interface(card: AgentCard) -> Interface:
    """The first interface of the card we speak, in the card's order (its preference)."""
    for offered in card.supported_interfaces:
        if speaks(offered.protocol_binding, offered.protocol_version):
            return Interface(
                url=offered.url,
                binding=offered.protocol_binding,
                protocol_version=offered.protocol_version,
                tenant=offered.tenant or None,
            )
    listed = ", ".join(
        f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces
    )
    raise RegistryError(
        f"card of {card.name!r} offers no interface this coordinator speaks "
        f"(JSONRPC, HTTP+JSON or GRPC at 1.x, JSONRPC at 0.3); it offers: {listed}",
        "no_supported_interface",
    )


def accepted_interface(card: AgentCard, expect_skill: str | None) -> Interface:
    """The interface we will talk to, or a :class:`RegistryError` saying why there is none."""
    interface = choose_interface(card)
    if expect_skill is not None and card.skill(expect_skill) is None:
        raise RegistryError(
            f"card of {card.name!r} does not declare skill {expect_skill!r}", "skill_missing"
        )
    return interface


class Transport(Protocol):
    """One interface of one remote agent; every call raises our own error types."""

    interface: Interface

    @property
    def endpoint(self) -> str: ...

    async def send_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> SendMessageResponse: ...

    async def get_task(
        self, request: GetTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task: ...

    async def cancel_task(
        self, request: CancelTaskRequest, headers: Mapping[str, str] | None = None
    ) -> Task: ...

    def stream_message(
        self, request: SendMessageRequest, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[StreamResponse, None]: ...

    def subscribe(
        self, task_id: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[StreamResponse]: ...

    async def extended_card(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """``GetExtendedAgentCard``: the card document as received (verify it!)."""
        ...
