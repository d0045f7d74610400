"""``POST /token-exchange``: RFC 8693 token exchange for the holders of delegation tokens.

The route takes no operator token: a member authenticates with what it presents, its
delegation token (``subject_token``) and a proof signed by the key that token was minted
for (``actor_token``), see :mod:`coordinator.authority.exchange`. The body is
``application/x-www-form-urlencoded`` (RFC 8693 section 2.1), each parameter once; the
answer is the RFC 8693 response plus where to send (``endpoint``, ``binding``) and the
handoff the message must name. A refusal is the API's error document
``{"error": {"reason", "message"}}`` with a 4xx status, never a traceback.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from agent_cards.trusted import TrustedKeys, VerificationKey
from contracts.chain import GRANT_TYPE, JWT_TOKEN_TYPE, MAX_CHAIN_DEPTH
from coordinator.authority import identity
from coordinator.authority.exchange import OPTIONAL, REQUIRED, Target, TokenExchange
from coordinator.authority.holder_proof import ExchangeRefused
from coordinator.errors import RegistryError
from coordinator.remote.cards.registry import Registry
from coordinator.service.api_models import ErrorView
from coordinator.telemetry import http
from coordinator.workspace import Workspace

EXCHANGE_PATH = "/token-exchange"
FORM = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 64 * 1024
NO_STORE = {"Cache-Control": "no-store"}
FORM_SCHEMA: dict[str, object] = {
    "type": "object",
    "required": list(REQUIRED),
    "properties": {
        **{name: {"type": "string", "minLength": 1} for name in (*REQUIRED, *OPTIONAL)},
        "grant_type": {"const": GRANT_TYPE},
        "subject_token_type": {"const": JWT_TOKEN_TYPE},
        "actor_token_type": {"const": JWT_TOKEN_TYPE},
        "expires_in": {"type": "string", "pattern": "^[0-9]{1,9}$"},
    },
    "additionalProperties": False,
}


def exchange_router(ws: Workspace) -> APIRouter:
    exchange = TokenExchange(
        ws,
        lambda: identity.coordinator_keys(ws.data),
        identity.issuer_id(),
        targets=lambda name: _target(ws, name),
        pinned_keys=lambda: _pinned_keys(ws),
        max_depth=MAX_CHAIN_DEPTH,
    )
    router = APIRouter(tags=["delegations"])

    @router.post(
        EXCHANGE_PATH,
        response_model=None,
        responses={
            200: {"description": "the child token (RFC 8693 section 2.2)"},
            400: {"model": ErrorView, "description": "the request is malformed"},
            401: {"model": ErrorView, "description": "bad subject token or possession proof"},
            403: {"model": ErrorView, "description": "the child would widen its parent"},
            404: {"model": ErrorView, "description": "no such agent or skill"},
        },
        openapi_extra={
            "requestBody": {"required": True, "content": {FORM: {"schema": FORM_SCHEMA}}}
        },
    )
    async def token_exchange(request: Request) -> JSONResponse:
        """A child delegation token for a third registered agent (RFC 8693)."""
        try:
            parameters = _form(request.headers.get("content-type"), await request.body())
            exchanged = await asyncio.to_thread(exchange.exchange, parameters)
        except ExchangeRefused as refused:
            http.note(denial_reason=refused.reason)
            body = {"error": {"reason": refused.reason, "message": str(refused)}}
            return JSONResponse(body, status_code=refused.status, headers=NO_STORE)
        return JSONResponse(exchanged.answer(int(time.time())), headers=NO_STORE)

    return router


def _form(content_type: str | None, body: bytes) -> dict[str, str]:
    """The form's parameters, each once, or ``exchange_request_invalid``."""
    if (content_type or "").split(";", 1)[0].strip().lower() != FORM:
        raise ExchangeRefused(400, "exchange_request_invalid", f"the body must be {FORM}")
    if len(body) > MAX_FORM_BYTES:
        raise ExchangeRefused(400, "exchange_request_invalid", "the form is too large")
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        raise ExchangeRefused(400, "exchange_request_invalid", "the form is malformed") from None
    parameters = dict(pairs)
    if len(parameters) != len(pairs):
        raise ExchangeRefused(400, "exchange_request_invalid", "a parameter is given twice")
    return parameters


def _target(ws: Workspace, name: str) -> Target | None:
    try:
        agent = Registry(ws.data).get(name)
    except RegistryError:
        return None
    return Target(agent.name, agent.known_identity, agent.agent_card, agent.endpoint, agent.binding)


def _pinned_keys(ws: Workspace) -> list[VerificationKey]:
    """Every key the operator pinned for a registered agent (a set that no longer loads
    pins nothing)."""
    found: list[VerificationKey] = []
    for agent in Registry(ws.data).agents():
        try:
            found.extend(TrustedKeys.from_json(agent.pinned_jwks))
        except ValueError:
            continue
    return found
