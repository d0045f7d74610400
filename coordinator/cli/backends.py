"""The two coordinators a command can talk to: this data directory, or a server's API.

Both take the API's request documents and answer with plain JSON documents, so every
command is written once and printed by one set of printers
(:mod:`coordinator.cli.printers`). :class:`Local` calls the service in this process;
:class:`Remote` sends the same requests to ``federation serve coordinator``.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any, Protocol

from coordinator.cli.api_client import CoordinatorClient
from coordinator.service.api_models import DelegationRequest, RegisterRequest
from coordinator.service.facade import CoordinatorService
from coordinator.service.run_list import RunQuery


class Coordinator(Protocol):
    def register(self, request: RegisterRequest) -> dict[str, Any]: ...
    def agents(self) -> list[dict[str, Any]]: ...
    def delegate(self, request: DelegationRequest) -> dict[str, Any]: ...
    def runs(self, query: RunQuery) -> dict[str, Any]: ...
    def run(self, run_id: str) -> dict[str, Any]: ...
    def audit_verify(self, bundle: dict[str, Any] | None) -> dict[str, Any]: ...
    def jwks(self) -> dict[str, Any]: ...
    def audit_show(self, run_id: str) -> dict[str, Any]: ...
    def audit_export(self, run_id: str) -> dict[str, Any]: ...
    def audit_prove(self, run_id: str) -> dict[str, Any]: ...
    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]: ...


class Local:
    """The service over this process's data directory (or ``--database-url``)."""

    def __init__(self, service: CoordinatorService) -> None:
        self.service = service

    def register(self, request: RegisterRequest) -> dict[str, Any]:
        return asyncio.run(self.service.register(request)).model_dump()

    def agents(self) -> list[dict[str, Any]]:
        return [agent.model_dump() for agent in self.service.agents()]

    def delegate(self, request: DelegationRequest) -> dict[str, Any]:
        return asyncio.run(self.service.delegate(self.service.order(request)))

    def runs(self, query: RunQuery) -> dict[str, Any]:
        return self.service.runs(query).model_dump()

    def run(self, run_id: str) -> dict[str, Any]:
        return self.service.run(run_id)

    def audit_verify(self, bundle: dict[str, Any] | None) -> dict[str, Any]:
        return self.service.audit_verify(bundle).model_dump()

    def jwks(self) -> dict[str, Any]:
        return self.service.jwks()

    def audit_show(self, run_id: str) -> dict[str, Any]:
        return self.service.audit_show(run_id)

    def audit_export(self, run_id: str) -> dict[str, Any]:
        return self.service.audit_export(run_id)

    def audit_prove(self, run_id: str) -> dict[str, Any]:
        return self.service.audit_prove(run_id)

    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]:
        return self.service.audit_consistency(first, second)


class Remote:
    """A running coordinator, through its HTTP API as its operator."""

    def __init__(self, client: CoordinatorClient) -> None:
        self.client = client

    def register(self, request: RegisterRequest) -> dict[str, Any]:
        return self.client.register(request.model_dump(exclude_none=True))

    def agents(self) -> list[dict[str, Any]]:
        return self.client.agents()

    def delegate(self, request: DelegationRequest) -> dict[str, Any]:
        return self.client.delegate(request.model_dump(exclude_none=True))

    def runs(self, query: RunQuery) -> dict[str, Any]:
        return self.client.runs(asdict(query))

    def run(self, run_id: str) -> dict[str, Any]:
        return self.client.run(run_id)

    def audit_verify(self, bundle: dict[str, Any] | None) -> dict[str, Any]:
        return self.client.audit_verify(bundle)

    def jwks(self) -> dict[str, Any]:
        return self.client.jwks()

    def audit_show(self, run_id: str) -> dict[str, Any]:
        return self.client.audit_show(run_id)

    def audit_export(self, run_id: str) -> dict[str, Any]:
        return self.client.audit_export(run_id)

    def audit_prove(self, run_id: str) -> dict[str, Any]:
        return self.client.audit_prove(run_id)

    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]:
        return self.client.audit_consistency(first, second)
