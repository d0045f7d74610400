"""The two coordinators a command can talk to: this data directory, or a server's API.

Both take the API's request documents and answer with plain JSON documents, so every
command is written once and printed by one set of printers
(:mod:`coordinator.cli.printers`). :class:`Local` calls the service in this process;
:class:`Remote` sends the same requests to ``federation serve coordinator``.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from coordinator import loop as event_loop
from coordinator.errors import LeftToRecovery, StillOnServer

if TYPE_CHECKING:  # the service is loaded only for this data directory, never for --server
    from coordinator.cli.api_client import CoordinatorClient
    from coordinator.service.api_requests import DelegationRequest, RegisterRequest
    from coordinator.service.facade import CoordinatorService
    from coordinator.service.run_list import RunQuery

# Who a cancel from the command line is recorded as (the API records its own caller).
CLI_OPERATOR = "operator (command line)"

INTERRUPTING = "federation: interrupted: cancelling the run (Ctrl-C again leaves it to recovery)"


class Coordinator(Protocol):
    def register(self, request: RegisterRequest) -> dict[str, Any]: ...
    def agents(self) -> list[dict[str, Any]]: ...
    def agent(self, name: str) -> dict[str, Any]: ...
    def pending(self) -> list[dict[str, Any]]: ...
    def refuse_pending(self, name: str) -> dict[str, Any]: ...
    def remove_agent(self, name: str) -> dict[str, Any]: ...
    def delegate(self, request: DelegationRequest, progress: Any = None) -> dict[str, Any]: ...
    def runs(self, query: RunQuery) -> dict[str, Any]: ...
    def run(self, run_id: str) -> dict[str, Any]: ...
    def cancel(self, run_id: str, reason: str | None) -> dict[str, Any]: ...
    def revoke(self, target: str, reason: str | None) -> dict[str, Any]: ...
    def audit_verify(self, bundle: dict[str, Any] | None) -> dict[str, Any]: ...
    def jwks(self) -> dict[str, Any]: ...
    def audit_show(self, run_id: str) -> dict[str, Any]: ...
    def audit_export(self, run_id: str) -> dict[str, Any]: ...
    def audit_prove(self, run_id: str) -> dict[str, Any]: ...
    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]: ...

    def audit_reconcile(self, run_id: str) -> dict[str, Any]: ...
    def set_audit_credential(self, name: str, token: str) -> dict[str, Any]: ...
    def remove_audit_credential(self, name: str) -> dict[str, Any]: ...


class Local:
    """The service over this process's data directory (or ``--database-url``), opened
    by ``open_service`` when a command first asks it something (asyncio too is imported
    only by the methods that run the service's loop: ``--server`` never needs it)."""

    def __init__(self, open_service: Callable[[], CoordinatorService]) -> None:
        self.open_service = open_service

    @cached_property
    def service(self) -> CoordinatorService:
        return self.open_service()

    def register(self, request: RegisterRequest) -> dict[str, Any]:
        return event_loop.run(self.service.register(request)).model_dump()

    def agents(self) -> list[dict[str, Any]]:
        return [agent.model_dump() for agent in self.service.agents()]

    def agent(self, name: str) -> dict[str, Any]:
        return self.service.agent_detail(name).model_dump()

    def pending(self) -> list[dict[str, Any]]:
        return [held.model_dump() for held in self.service.pending()]

    def refuse_pending(self, name: str) -> dict[str, Any]:
        return self.service.refuse_pending(name).model_dump()

    def remove_agent(self, name: str) -> dict[str, Any]:
        return self.service.remove_agent(name).model_dump()

    def delegate(self, request: DelegationRequest, progress: Any = None) -> dict[str, Any]:
        """Driven in this process, each step told to ``progress`` as it happens: the first
        Ctrl-C cancels the run (as ``federation cancel`` would) and the document says so;
        a second one stops at once and leaves the run to recovery (:class:`LeftToRecovery`
        names the command that ends it)."""
        import asyncio

        from coordinator.dispatch.delegate import Interruption

        order = self.service.order(request)
        interruption = Interruption()

        async def delegate() -> dict[str, Any]:
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
            assert task is not None

            def interrupted() -> None:
                if interruption.requested.is_set():
                    task.cancel()
                else:
                    print(INTERRUPTING, file=sys.stderr, flush=True)
                    interruption.stop()

            loop.add_signal_handler(signal.SIGINT, interrupted)
            try:
                return await self.service.delegate(order, interruption, progress)
            finally:
                loop.remove_signal_handler(signal.SIGINT)

        try:
            return event_loop.run(delegate())
        except asyncio.CancelledError:
            raise LeftToRecovery(interruption.run_id) from None

    def runs(self, query: RunQuery) -> dict[str, Any]:
        return self.service.runs(query).model_dump()

    def run(self, run_id: str) -> dict[str, Any]:
        return self.service.run(run_id)

    def cancel(self, run_id: str, reason: str | None) -> dict[str, Any]:
        return event_loop.run(self.service.cancel(run_id, reason, CLI_OPERATOR))

    def revoke(self, target: str, reason: str | None) -> dict[str, Any]:
        import asyncio

        return asyncio.run(self.service.revoke(target, reason, CLI_OPERATOR))

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

    def audit_reconcile(self, run_id: str) -> dict[str, Any]:
        return self.service.audit_reconcile(run_id)

    def set_audit_credential(self, name: str, token: str) -> dict[str, Any]:
        return self.service.set_audit_credential(name, token)

    def remove_audit_credential(self, name: str) -> dict[str, Any]:
        return self.service.remove_audit_credential(name)


class Remote:
    """A running coordinator, through its HTTP API as its operator."""

    def __init__(self, client: CoordinatorClient) -> None:
        self.client = client

    def register(self, request: RegisterRequest) -> dict[str, Any]:
        return self.client.register(request.model_dump(exclude_none=True))

    def agents(self) -> list[dict[str, Any]]:
        return self.client.agents()

    def agent(self, name: str) -> dict[str, Any]:
        return self.client.agent(name)

    def pending(self) -> list[dict[str, Any]]:
        return self.client.pending()

    def refuse_pending(self, name: str) -> dict[str, Any]:
        return self.client.refuse_pending(name)

    def remove_agent(self, name: str) -> dict[str, Any]:
        return self.client.remove_agent(name)

    def delegate(self, request: DelegationRequest, progress: Any = None) -> dict[str, Any]:
        """The server drives it (its steps are not reported here: ``federation runs`` on
        the server shows it live): a Ctrl-C here stops waiting, not the run (the message
        says how to find and cancel it)."""
        try:
            return self.client.delegate(request.model_dump(exclude_none=True))
        except KeyboardInterrupt:
            raise StillOnServer() from None

    def runs(self, query: RunQuery) -> dict[str, Any]:
        return self.client.runs(asdict(query))

    def run(self, run_id: str) -> dict[str, Any]:
        return self.client.run(run_id)

    def cancel(self, run_id: str, reason: str | None) -> dict[str, Any]:
        return self.client.cancel(run_id, {"reason": reason} if reason else {})

    def revoke(self, target: str, reason: str | None) -> dict[str, Any]:
        return self.client.revoke({"target": target} | ({"reason": reason} if reason else {}))

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

    def audit_reconcile(self, run_id: str) -> dict[str, Any]:
        return self.client.audit_reconcile(run_id)

    def set_audit_credential(self, name: str, token: str) -> dict[str, Any]:
        return self.client.set_audit_credential(name, token)

    def remove_audit_credential(self, name: str) -> dict[str, Any]:
        return self.client.remove_audit_credential(name)
