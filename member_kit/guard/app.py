"""The guard as an ASGI app, and the function that runs it as a process.

Routes, as a kit member serves them: ``GET /.well-known/agent-card.json`` (the upstream's
card rewritten, :mod:`.card`, signed with the guard's active key), ``GET
/.well-known/jwks.json`` (the guard's keys, with their successions), ``POST /a2a/jsonrpc``
and ``/a2a/rest/...`` (the operations of :mod:`.forward`, behind the kit's edge limits,
token-first check and authorizer; with ``grpc_port`` the gRPC binding too, over the
same dispatcher), ``GET /healthz``, ``/livez``, ``/metrics`` and the
audit routes ``federation audit reconcile`` reads. The decision log, the replay record
and the coordinator heads witnessed live in the guard's database, as a member's do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from agent_cards.serving import card_route
from contracts.wire import AgentCard
from member_kit.audit.log import DecisionLedger
from member_kit.audit.receipts import ReceiptIssuer
from member_kit.audit.routes import audit_routes
from member_kit.audit.witness import WitnessedHeads
from member_kit.guard.card import guarded_card
from member_kit.guard.forward import Agent, ForwardingHandler
from member_kit.guard.settings import GuardSettings
from member_kit.guard.tasks import GuardedTasks
from member_kit.guard.upstream import Upstream, fetch_card, jsonrpc_url
from member_kit.server import limits, observed, rest
from member_kit.server.app import (
    JSONRPC_PATHS,
    default_authorize,
    durable_store,
    grpc_address,
    jwks_route,
    serve_app,
    signed_card,
    with_keys,
)
from member_kit.server.decisions import DecisionLog
from member_kit.server.grpc_binding import GRPCServer
from member_kit.server.health import health_routes
from member_kit.server.jsonrpc import JSONRPCEndpoint
from member_kit.server.metrics_route import metrics_route
from member_kit.settings import JSONRPC_PATH, REST_PATH
from member_kit.telemetry.http import ObservedHTTP

NAME = "guard"


@dataclass(frozen=True)
class GuardedParts:
    """What governs an agent, to put in any Starlette app: its ``routes``, the
    ``lifespan`` that starts and stops the gRPC binding and the stores, and ``install``,
    which puts the app behind the edge limits and the token-first check and gives it the
    parts in ``app.state``."""

    routes: list[BaseRoute]
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]]
    install: Callable[[Starlette], None]


def create_guard_app(settings: GuardSettings, upstream_card: AgentCard) -> FastAPI:
    """The guard for ``settings`` in front of the agent whose card is ``upstream_card``."""
    settings = with_keys(settings)
    upstream = Upstream(
        jsonrpc_url(upstream_card, settings.upstream_url),
        max_bytes=settings.upstream_max_bytes,
        timeout=settings.upstream_timeout_seconds,
        connections=settings.upstream_connections,
    )
    parts = guarded_parts(settings, upstream_card, upstream)
    app = FastAPI(
        title=NAME,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=parts.lifespan,
        routes=parts.routes,
    )
    parts.install(app)
    return app


def guarded_parts(settings: GuardSettings, agent_card: AgentCard, agent: Agent) -> GuardedParts:
    """The parts that govern ``agent`` (whose card is ``agent_card``) for ``settings``."""
    settings = with_keys(settings)
    keys = settings.signing_keys
    assert keys is not None
    address = grpc_address(settings)
    card = guarded_card(agent_card, settings.public_base_url, settings.skill_scopes, address)
    durable = durable_store(settings)
    engine = durable.engine if durable else None
    audit_log, witnessed = DecisionLedger(engine), WitnessedHeads(engine)
    decisions = DecisionLog(settings.decision_log_limit, audit_log)
    tasks = GuardedTasks(settings.task_capacity)
    replay_guard = durable.replay_guard if durable else None
    authorize = default_authorize(settings, card, decisions, replay_guard, tasks.binding, witnessed)
    handler = ForwardingHandler(agent, tasks, ReceiptIssuer(lambda: keys, audit_log).stamp)
    endpoint = JSONRPCEndpoint(
        handler, authorize=authorize, max_body_bytes=settings.edge_limits.max_body_bytes
    )
    authenticate = getattr(authorize, "authenticate", None)
    grpc_server = (
        GRPCServer(
            endpoint.dispatcher,
            authenticate,
            address,
            limits=settings.edge_limits,
            refused=observed.grpc_connection_refused,
        )
        if address is not None
        else None
    )

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            if grpc_server is not None:
                await grpc_server.start()
            yield
            if grpc_server is not None:
                await grpc_server.stop()
            await agent.aclose()
        finally:
            if durable is not None:
                durable.close()

    def install(app: Starlette) -> None:
        guards = (
            limits.Guard(limits.posts_to(JSONRPC_PATHS)),
            limits.Guard(rest.covers(REST_PATH), rest.refusal),
        )
        limits.install(app, settings.edge_limits, guards=guards, authenticate=authenticate)
        app.add_middleware(ObservedHTTP)
        app.state.settings = settings
        app.state.card = card
        app.state.signing_keys = keys
        app.state.decisions = decisions
        app.state.audit_log = audit_log
        app.state.witnessed_heads = witnessed
        app.state.task_store = tasks
        app.state.durable_store = durable

    rest_endpoint = rest.RESTEndpoint(endpoint.dispatcher).handle
    routes: list[BaseRoute] = [
        card_route(signed_card(card, keys.active), settings.card_max_age_seconds),
        jwks_route(keys),
        Route(JSONRPC_PATH, endpoint.handle, methods=["POST"], name="a2a_jsonrpc"),
        Route(JSONRPC_PATH + "/", endpoint.handle, methods=["POST"]),
        Route(REST_PATH + "/{path:path}", rest_endpoint, methods=["GET", "POST", "DELETE"]),
        *health_routes(engine),
        metrics_route(settings.metrics_token),
        *audit_routes(
            settings.audit_token, audit_log, witnessed, lambda: keys.active, settings.agent_id
        ),
    ]
    return GuardedParts(routes, lifespan, install)


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
