"""The risk service as an ASGI app, and the function that runs it as a process.

Routes: ``GET /.well-known/agent-card.json`` (the card, cacheable) and
``POST /a2a/jsonrpc`` (A2A v1.0 JSON-RPC). ``authorize`` is the hook where a later change
verifies a delegation token and decides the task owner; by default every caller is the
anonymous owner.
"""

from __future__ import annotations

import socket
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import uvicorn
from fastapi import FastAPI
from starlette.routing import Route

from agent_cards.documents import card_for
from agent_cards.serving import card_route
from contracts.wire import AgentCard
from remote_risk.handler import RiskAgentHandler
from remote_risk.jsonrpc import Authorize, JSONRPCEndpoint, anonymous
from remote_risk.settings import Settings
from remote_risk.tasks import TaskStore

JSONRPC_PATH = "/a2a/jsonrpc"
CARD_DOCUMENT = "risk"


def risk_card(public_base_url: str) -> AgentCard:
    """The risk service's card as served from ``public_base_url``."""
    return card_for(CARD_DOCUMENT, public_base_url)


def create_app(settings: Settings | None = None, *, authorize: Authorize = anonymous) -> FastAPI:
    settings = settings or Settings()
    card = risk_card(settings.public_base_url)
    store = TaskStore(settings.task_capacity)
    handler = RiskAgentHandler(store, skill_delay_seconds=settings.skill_delay_seconds)
    received: deque[bytes] | None = (
        deque(maxlen=settings.recorded_requests_limit) if settings.record_requests else None
    )
    endpoint = JSONRPCEndpoint(
        handler,
        authorize=authorize,
        max_body_bytes=settings.max_body_bytes,
        record_body=received.append if received is not None else None,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    app = FastAPI(
        title="remote-risk",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
        routes=[
            card_route(card, settings.card_max_age_seconds),
            Route(JSONRPC_PATH, endpoint.handle, methods=["POST"], name="a2a_jsonrpc"),
        ],
    )
    app.state.settings = settings
    app.state.card = card
    app.state.task_store = store
    app.state.received_bodies = received
    return app


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    public_base_url: str | None = None,
    settings: Settings | None = None,
) -> None:
    """Run the service until interrupted; port 0 picks a free port.

    The first line on stdout is ``remote_risk listening on http://HOST:PORT`` with the
    real port, printed once the socket accepts connections. The card advertises
    ``public_base_url`` if given, else that listening URL. Access logs are off so that a
    parent reading stdout is never blocked by a full pipe; other logs go to stderr.
    """
    sock = listening_socket(host, port)
    listening_url = f"http://{_url_host(host)}:{sock.getsockname()[1]}"
    settings = replace(settings or Settings(), public_base_url=public_base_url or listening_url)
    config = uvicorn.Config(create_app(settings), log_level="info", access_log=False, lifespan="on")
    print(f"remote_risk listening on {listening_url}", flush=True)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
