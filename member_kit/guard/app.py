"""The guard as an ASGI app, and the function that runs it as a process.

Routes, as a kit member serves them: ``GET /.well-known/agent-card.json`` (the upstream's
card rewritten, :mod:`.card`, signed with the guard's active key), ``GET
/.well-known/jwks.json`` (the guard's keys, with their successions), ``POST /a2a/jsonrpc``
and ``/a2a/rest/...`` (the operations of :mod:`.forward`, behind the kit's edge limits,
token-first check and authorizer; with ``grpc_port`` the gRPC binding too, over the
same dispatcher), ``GET /healthz``, ``/livez``, ``/metrics`` and the
audit routes ``federation audit reconcile`` reads. The decision log, the replay record,
the coordinator heads witnessed and whose each task is live in the guard's database, as
a member's do. :func:`guarded_parts` gives the same for an agent called in-process
(:mod:`member_kit.sdk`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from contracts.wire import AgentCard, CancelTaskRequest
from member_kit.audit.receipts import ReceiptIssuer
from member_kit.errors import MemberError
from member_kit.guard.card import guarded_card
from member_kit.guard.forward import Agent, ForwardingHandler
from member_kit.guard.settings import GuardSettings
from member_kit.guard.sql_tasks import SQLGuardedTasks
from member_kit.guard.tasks import GuardedTasks, TaskOwners
from member_kit.guard.upstream import Upstream, fetch_card, jsonrpc_url
from member_kit.server.app import (
    default_authorize,
    jwks_route,
    revocations_of,
    serve_app,
    signed_card,
    with_keys,
)
from member_kit.server.assembly import (
    Ledgers,
    MemberParts,
    grpc_address,
    grpc_server_of,
    member_app,
    member_parts,
    open_ledgers,
)
from member_kit.server.jsonrpc import CallContext, JSONRPCEndpoint
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.revocation_sync import CancelUnder, RevocationEndpoint

NAME = "guard"
GuardedParts = MemberParts


def create_guard_app(settings: GuardSettings, upstream_card: AgentCard) -> FastAPI:
    """The guard for ``settings`` in front of the agent whose card is ``upstream_card``."""
    settings = with_keys(settings)
    upstream = Upstream(
        jsonrpc_url(upstream_card, settings.upstream_url),
        max_bytes=settings.upstream_max_bytes,
        timeout=settings.upstream_timeout_seconds,
        connections=settings.upstream_connections,
    )
    return member_app(NAME, guarded_parts(settings, upstream_card, upstream))


def guarded_parts(settings: GuardSettings, agent_card: AgentCard, agent: Agent) -> MemberParts:
    """The parts that govern ``agent`` (whose card is ``agent_card``) for ``settings``,
    reporting under ``settings.member_name`` (``guard_*`` metrics by default)."""
    telemetry = Telemetry.of(settings.member_name)
    settings = with_keys(settings)
    keys = settings.signing_keys
    assert keys is not None
    card = guarded_card(
        agent_card, settings.public_base_url, settings.skill_scopes, grpc_address(settings)
    )
    ledgers = open_ledgers(settings, telemetry)
    durable = ledgers.durable
    tasks = task_owners(settings, ledgers)
    replay_guard = durable.replay_guard if durable else None
    revocations = revocations_of(settings, durable)
    authorize = default_authorize(
        settings,
        card,
        ledgers.decisions,
        replay_guard,
        tasks.binding,
        ledgers.witnessed,
        revocations=revocations,
        proof_replay=durable.proof_replay if durable else None,
    )
    stamp = ReceiptIssuer(lambda: keys, ledgers.audit_log).stamp
    handler = ForwardingHandler(agent, tasks, stamp, ledgers.audit_log)
    revoking = (
        RevocationEndpoint(
            revocations, _canceller(handler, tasks), settings.revocation_poll_seconds
        )
        if revocations is not None
        else None
    )
    endpoint = JSONRPCEndpoint(
        handler,
        authorize=authorize,
        max_body_bytes=settings.edge_limits.max_body_bytes,
        telemetry=telemetry,
    )
    authenticate = getattr(authorize, "authenticate", None)
    grpc_server = grpc_server_of(endpoint, authenticate, settings)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        poller = asyncio.create_task(revoking.poll_forever()) if revoking else None
        try:
            if grpc_server is not None:
                await grpc_server.start()
            yield
            if grpc_server is not None:
                await grpc_server.stop()
            await agent.aclose()
        finally:
            if poller is not None:
                poller.cancel()
            if durable is not None:
                durable.close()

    served = (signed_card(card, keys.active), keys, jwks_route(keys))
    parts = member_parts(
        lifespan, settings, served, endpoint, ledgers, authenticate, task_store=tasks
    )
    if revoking is not None:
        parts.routes.append(revoking.route())
    return parts


def _canceller(handler: ForwardingHandler, tasks: TaskOwners) -> CancelUnder:
    """CancelTask, forwarded to the agent, for each task opened under a revoked grant."""

    async def cancel_under(owner: str) -> list[str]:
        cancelled = []
        for task_id in tasks.owned_by(owner, tasks.capacity):
            try:
                await handler.cancel_task(CancelTaskRequest(id=task_id), CallContext(owner))
            except MemberError:  # finished already, or the agent refused: nothing to stop
                continue
            cancelled.append(task_id)
        return cancelled

    return cancel_under


def task_owners(settings: GuardSettings, ledgers: Ledgers) -> TaskOwners:
    """Whose each task is: in the guard's database when it has one, else in memory."""
    if ledgers.engine is not None:
        return SQLGuardedTasks(ledgers.engine, settings.task_capacity)
    return GuardedTasks(settings.task_capacity)


def build(settings: GuardSettings) -> FastAPI:
    """The guard app, the upstream's card fetched now (``UpstreamCardInvalid`` if not)."""
    upstream_card = fetch_card(
        settings.upstream_url,
        max_bytes=settings.upstream_max_bytes,
        timeout=settings.upstream_timeout_seconds,
    )
    return create_guard_app(settings, upstream_card)


def serve(host: str, port: int, *, public_base_url: str | None, settings: GuardSettings) -> None:
    """Run the guard until interrupted; the first line on stdout is ``guard listening on
    http://HOST:PORT`` (:func:`~member_kit.server.app.serve_app`)."""
    serve_app(NAME, build, host, port, public_base_url=public_base_url, settings=settings)
