"""What every member app is made of beside its own A2A operations, built once.

A member on the kit (:func:`member_kit.server.app.create_app`) and the guard in front of
another team's agent (:func:`member_kit.guard.app.create_guard_app`) differ only in who
answers an A2A operation. Everything else is assembled here the same way for both: the
ledgers (the durable store, the decision log and its signed heads, the coordinator heads
witnessed), the gRPC server over the same dispatcher, and the app itself with its routes
(card, JWK Set, JSON-RPC, HTTP+JSON, health, metrics, the audit routes), the edge's limits
in front of them and the observed HTTP layer outermost.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from agent_cards.keys import KeySet
from agent_cards.serving import card_route
from contracts.wire import AgentCard
from member_kit.audit.log import DecisionLedger
from member_kit.audit.routes import audit_routes
from member_kit.audit.witness import WitnessedHeads
from member_kit.server import limits, rest
from member_kit.server.answers_first import AnswersFirst
from member_kit.server.grpc_binding import GRPCServer
from member_kit.server.jsonrpc import JSONRPCEndpoint
from member_kit.server.store import DurableStore, open_store
from member_kit.settings import JSONRPC_PATH, REST_PATH, MemberSettings
from member_kit.storage.health import health_routes
from member_kit.telemetry.http import ObservedHTTP
from member_kit.telemetry.metrics_route import metrics_route
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.decisions import DecisionLog
from member_kit.trust.verifier import DEFAULT_LEEWAY

JSONRPC_PATHS = frozenset({JSONRPC_PATH, JSONRPC_PATH + "/"})
# The member's own observed edge (ObservedHTTP) makes each request's one span, access line
# and metrics; FastAPI's native telemetry (where the installed FastAPI has it) would be a
# second set, and asks on every request whether a global provider is configured.
_NATIVE_TELEMETRY_OFF: dict[str, Any] = (
    {
        "telemetry": {
            "tracing": False,
            "metrics": False,
            "logs": False,
            "operation_spans": False,
        }
    }
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)
Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]
Authenticate = Callable[..., Any] | None


@dataclass(frozen=True)
class Ledgers:
    """Where a member keeps what it decided: its database (None: all in memory), the
    decision log with signed heads, and the coordinator heads it has witnessed."""

    durable: DurableStore | None
    audit_log: DecisionLedger
    witnessed: WitnessedHeads
    decisions: DecisionLog

    @property
    def engine(self) -> Engine | None:
        return self.durable.engine if self.durable else None


def open_ledgers(settings: MemberSettings, telemetry: Telemetry) -> Ledgers:
    """The ledgers ``settings`` name, in the database when they name one (the database of
    the member ``telemetry`` names); the decisions counted in ``telemetry`` (the app's)."""
    durable = durable_store(settings, telemetry.names.base)
    engine = durable.engine if durable else None
    audit_log = DecisionLedger(engine)
    decisions = DecisionLog(settings.decision_log_limit, audit_log, telemetry)
    return Ledgers(durable, audit_log, WitnessedHeads(engine), decisions)


def durable_store(settings: MemberSettings, member: str) -> DurableStore | None:
    """The migrated database the settings name, ``member``'s, or None to keep everything
    in memory."""
    if settings.database_url is None and settings.data_dir is None:
        return None
    return open_store(
        settings.task_capacity,
        member=member,
        database_url=settings.database_url,
        data_dir=settings.data_dir,
        leeway=DEFAULT_LEEWAY,
        lease_seconds=settings.task_lease_seconds,
        retention=timedelta(seconds=settings.idempotency_retention_seconds),
    )


def grpc_server_of(
    endpoint: JSONRPCEndpoint, authenticate: Authenticate, settings: MemberSettings
) -> GRPCServer | None:
    """The gRPC binding over ``endpoint``'s dispatcher, when the settings give it a port
    (observed, its refused connections counted, in the dispatcher's telemetry)."""
    address = grpc_address(settings)
    if address is None:
        return None
    return GRPCServer(
        endpoint.dispatcher,
        authenticate,
        address,
        limits=settings.edge_limits,
    )


def grpc_address(settings: MemberSettings) -> str | None:
    if settings.grpc_port is None:
        return None
    host = settings.grpc_host
    return f"[{host}]:{settings.grpc_port}" if ":" in host else f"{host}:{settings.grpc_port}"


@dataclass(frozen=True)
class MemberParts:
    """What makes an app a governed member, to put in any Starlette app: its ``routes``,
    the ``lifespan`` that starts and stops what runs beside it, and ``install``, which
    puts the app behind the edge's limits and the token-first check, observes it, and
    gives it the parts in ``app.state``."""

    routes: list[BaseRoute]
    lifespan: Lifespan
    install: Callable[[Starlette], None]


def member_parts(
    lifespan: Lifespan,
    settings: MemberSettings,
    served: tuple[AgentCard, KeySet, Route],
    endpoint: JSONRPCEndpoint,
    ledgers: Ledgers,
    authenticate: Authenticate,
    **state: Any,
) -> MemberParts:
    """The parts serving ``endpoint``; ``served`` is the signed card, the keys and the JWK
    Set route; ``authenticate`` is the authorizer's token-first check, if it has one.
    The app is observed in ``endpoint``'s telemetry (its ``/metrics`` too).
    ``app.state`` gets the settings, card, keys, ledgers and telemetry, and each further
    ``state``."""
    card, keys, jwks = served
    telemetry = endpoint.telemetry
    fields = {
        "settings": settings,
        "telemetry": telemetry,
        "card": card,
        "signing_keys": keys,
        "decisions": ledgers.decisions,
        "audit_log": ledgers.audit_log,
        "witnessed_heads": ledgers.witnessed,
        "durable_store": ledgers.durable,
        **state,
    }

    send_paths: Counter[str] = Counter()
    fields["send_paths"] = send_paths
    routes = _routes(settings, card, keys, jwks, endpoint, ledgers)
    jsonrpc_routes = {getattr(r, "path", ""): r for r in routes}
    jsonrpc_routes = {path: jsonrpc_routes[path] for path in JSONRPC_PATHS}

    def install(app: Starlette) -> None:
        # innermost: a blocking send, once the edge has checked it, skips the routing
        app.add_middleware(
            limits.FastSend, endpoint=endpoint, routes=jsonrpc_routes, counts=send_paths
        )
        guards = (
            limits.Guard(limits.posts_to(JSONRPC_PATHS)),
            limits.Guard(rest.covers(REST_PATH), rest.refusal),
        )
        limits.install(app, settings.edge_limits, guards=guards, authenticate=authenticate)
        # a new request lets the answers of a committed turn go out first
        app.add_middleware(AnswersFirst)
        # outermost: requests the edge refuses get their span and access line too
        app.add_middleware(ObservedHTTP, telemetry=telemetry)
        for name, value in fields.items():
            setattr(app.state, name, value)

    return MemberParts(routes, lifespan, install)


def member_app(title: str, parts: MemberParts) -> FastAPI:
    """The parts as one FastAPI app (no API docs: the card says what it serves; no
    telemetry but the member's own)."""
    app = FastAPI(
        title=title,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=parts.lifespan,
        routes=parts.routes,
        **_NATIVE_TELEMETRY_OFF,
    )
    parts.install(app)
    return app


def _routes(
    settings: MemberSettings,
    card: AgentCard,
    keys: KeySet,
    jwks: Route,
    endpoint: JSONRPCEndpoint,
    ledgers: Ledgers,
) -> list[BaseRoute]:
    return [
        card_route(card, settings.card_max_age_seconds),
        jwks,
        Route(JSONRPC_PATH, endpoint.handle, methods=["POST"], name="a2a_jsonrpc"),
        # the same endpoint, not a redirect: clients joining "/" to the URL post here
        Route(JSONRPC_PATH + "/", endpoint.handle, methods=["POST"], name="a2a_jsonrpc_slash"),
        Route(
            REST_PATH + "/{path:path}",
            rest.RESTEndpoint(endpoint.dispatcher).handle,
            methods=["GET", "POST", "DELETE"],
            name="a2a_rest",
        ),
        *health_routes(ledgers.engine),
        metrics_route(settings.metrics_token, endpoint.telemetry),
        *audit_routes(
            settings.audit_token,
            ledgers.audit_log,
            ledgers.witnessed,
            lambda: keys.active,
            settings.agent_id,
            endpoint.telemetry.names.audit_realm,
        ),
    ]
