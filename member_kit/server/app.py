"""A member's service as an ASGI app, and the function that runs it as a process.

The member brings its skill and its card (:class:`~member_kit.skill.Member`); everything
else here is the kit's.

Routes: ``GET /.well-known/agent-card.json`` (the card, signed with the service's active
key, cacheable), ``GET /.well-known/jwks.json`` (the service's public keys),
``POST /a2a/jsonrpc`` (A2A v1.0 JSON-RPC, with SSE for streaming), ``/a2a/rest/...``
(the HTTP+JSON binding, :mod:`member_kit.server.rest`), ``GET /healthz``
(readiness: a real write to its database) and ``GET /livez`` (liveness); see
:mod:`member_kit.storage.health`. On start it resumes the unfinished tasks a stopped
process left behind (see ``TaskOperations.start_background``). Push notifications are
signed with the service's active key and sent by :func:`push_configs` (see
:mod:`member_kit.server.webhooks`). ``authorize`` decides who may call and the task
owner: with trusted issuers in the settings it is
:func:`~member_kit.server.authorization.hook.delegation_authorizer` (every call needs a
delegation token), without them every caller is the anonymous owner (library and test use;
:func:`serve` refuses to run that way unless told it is insecure on purpose).

Storage: when the settings name a data directory or a database URL, tasks and the record
of used delegation tokens live in that database (:mod:`member_kit.storage`) and survive
a restart; otherwise both are kept in memory. :func:`serve` always uses the database,
by default the member's own file in its data directory (``remote-risk.db`` for
remote_risk, :func:`~member_kit.storage.engine.database_file`), which no other member may
open (:mod:`member_kit.storage.owner`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import uvicorn
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_cards.edge.listening import listening_socket, url_host
from agent_cards.edge.protocol import uvicorn_options
from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey
from agent_cards.runtime import collector
from agent_cards.signing import sign_card
from agent_cards.transparency.succession import SUCCESSIONS, successions_of
from contracts import strict_json
from contracts.wire import PROTOCOL_VERSION, AgentCard, AgentInterface, to_wire
from member_kit.audit.receipts import ReceiptIssuer
from member_kit.audit.witness import WitnessedHeads
from member_kit.configuration import check_operator_tokens, check_secure, insecure_warning
from member_kit.errors import ConfigurationError
from member_kit.server import limits
from member_kit.server.agent import AgentHandler
from member_kit.server.assembly import (
    grpc_address,
    grpc_server_of,
    member_app,
    member_parts,
    open_ledgers,
)
from member_kit.server.authorization.asked import TaskBinding, task_binding_of
from member_kit.server.authorization.hook import delegation_authorizer
from member_kit.server.jsonrpc import Authorize, JSONRPCEndpoint, anonymous
from member_kit.server.push import PushConfigs, TaskLookup
from member_kit.server.store import DurableStore
from member_kit.server.webhooks import PushDelivery, RetryPolicy, WebhookPolicy
from member_kit.settings import JSONRPC_PATH, MemberSettings
from member_kit.skill import Member
from member_kit.tasks.memory import TaskStore
from member_kit.tasks.protocol import TaskStoreProtocol
from member_kit.telemetry import logs
from member_kit.telemetry.names import TelemetryNames
from member_kit.telemetry.observed import Telemetry
from member_kit.trust import issuers as trust
from member_kit.trust.chain import ChainSettings
from member_kit.trust.decisions import DecisionLog
from member_kit.trust.holder_proof import ProofReplay
from member_kit.trust.refresh import IssuerDirectory
from member_kit.trust.replay import ReplayGuard
from member_kit.trust.request_checks import head_witness
from member_kit.trust.revocation import Revocations
from member_kit.trust.revocation_sync import RevocationEndpoint
from member_kit.trust.verifier import DelegationVerifier

__all__ = [
    "JSONRPC_PATH",
    "JWKS_PATH",
    "ConfigurationError",
    "check_operator_tokens",
    "check_secure",
    "create_app",
    "member_card",
    "revocations_of",
    "serve",
]

JWKS_PATH = "/.well-known/jwks.json"
JSONRPC_PATHS = frozenset({JSONRPC_PATH, JSONRPC_PATH + "/"})
JWKS_MAX_AGE_SECONDS = 300
Configured = TypeVar("Configured", bound=MemberSettings)


def member_card(member: Member, public_base_url: str, grpc_address: str | None = None) -> AgentCard:
    """The member's card as served from ``public_base_url`` (unsigned); with
    ``grpc_address`` (host:port) the gRPC binding is listed last, after the HTTP ones."""
    card = member.card(public_base_url)
    if grpc_address is None:
        return card
    grpc_interface = AgentInterface(
        url=grpc_address, protocol_binding="GRPC", protocol_version=PROTOCOL_VERSION
    )
    interfaces = [*card.supported_interfaces, grpc_interface]
    return card.model_copy(update={"supported_interfaces": interfaces})


def extended_card(card: AgentCard) -> AgentCard:
    """What an authenticated caller sees: the card, saying how its tokens are held."""
    note = (
        " For authenticated callers: every binding takes the same delegation token (aud is"
        " the RFC 9278 thumbprint URI of this card's signing key); one token opens at most"
        " one task, and sees only the tasks of its handoff."
    )
    return card.model_copy(update={"description": card.description + note})


def signed_card(card: AgentCard, key: SigningKey) -> AgentCard:
    """``card`` with a detached JWS by ``key`` over its final form (real URLs filled in)."""
    return AgentCard.model_validate(sign_card(to_wire(card), key))


def jwks_route(keys: KeySet) -> Route:
    """``GET /.well-known/jwks.json``: the unexpired public keys, active key first."""

    async def jwks(request: Request) -> Response:
        # with the statements by which each earlier key vouches for the next one
        document: dict[str, Any] = {**keys.public_jwks()}
        successions = successions_of(keys)
        if successions:
            document[SUCCESSIONS] = successions
        return Response(
            strict_json.dumps(document),
            media_type="application/json",
            headers={"Cache-Control": f"public, max-age={JWKS_MAX_AGE_SECONDS}"},
        )

    return Route(JWKS_PATH, jwks, methods=["GET"], name="jwks")


def create_app(
    settings: MemberSettings, member: Member, *, authorize: Authorize | None = None
) -> FastAPI:
    """The app of ``member`` for ``settings``; ``authorize`` overrides the hook the
    settings imply. Its telemetry (metrics registry, tracing, access logger) is its own,
    named by ``member.name`` (``app.state.telemetry``)."""
    telemetry = Telemetry.of(member.name)
    settings = with_keys(settings)
    keys = settings.signing_keys
    assert keys is not None
    unsigned = member_card(member, settings.public_base_url, grpc_address(settings))
    _check_interface_url(unsigned, settings)
    card = signed_card(unsigned, keys.active)
    ledgers = open_ledgers(settings, telemetry)
    durable = ledgers.durable
    receipts = ReceiptIssuer(lambda: keys, ledgers.audit_log)
    retention = timedelta(seconds=settings.idempotency_retention_seconds)
    store: TaskStoreProtocol = (
        durable.tasks if durable else TaskStore(settings.task_capacity, retention=retention)
    )
    revocations = revocations_of(settings, durable)
    if authorize is None:
        replay_guard = durable.replay_guard if durable else None
        binding = task_binding_of(store.get)
        authorize = default_authorize(
            settings,
            card,
            ledgers.decisions,
            replay_guard,
            binding,
            ledgers.witnessed,
            member.skill.needs_budget,
            revocations,
            durable.proof_replay if durable else None,
        )
    push = push_configs(settings, keys, store.get, telemetry)
    handler = AgentHandler(
        store,
        member.skill,
        skill_delay_seconds=settings.skill_delay_seconds,
        push=push,
        extended_card=signed_card(extended_card(unsigned), keys.active),
        stamp=receipts.stamp,
        chain=ChainSettings(settings.exchange_url, keys) if settings.exchange_url else None,
        telemetry=telemetry,
    )
    received: deque[bytes] | None = (
        deque(maxlen=settings.recorded_requests_limit) if settings.record_requests else None
    )
    endpoint = JSONRPCEndpoint(
        handler,
        authorize=authorize,
        max_body_bytes=settings.edge_limits.max_body_bytes,
        record_body=received.append if received is not None else None,
        telemetry=telemetry,
    )

    authenticate = getattr(authorize, "authenticate", None)
    grpc_server = grpc_server_of(endpoint, authenticate, settings)
    revoking = (
        RevocationEndpoint(
            revocations,
            handler.cancel_owned,
            settings.revocation_poll_seconds,
        )
        if revocations is not None
        else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        poller = asyncio.create_task(revoking.poll_forever()) if revoking else None
        try:
            handler.start_background()  # resumes what a stopped process left unfinished
            if grpc_server is not None:
                await grpc_server.start()
            yield
            if grpc_server is not None:
                await grpc_server.stop()
            await handler.aclose()
        finally:
            if poller is not None:
                poller.cancel()
            if durable is not None:
                durable.close()
        await push.delivery.aclose()

    served = (card, keys, jwks_route(keys))
    parts = member_parts(
        lifespan,
        settings,
        served,
        endpoint,
        ledgers,
        authenticate,
        task_store=store,
        push=push,
        received_bodies=received,
        revocations=revoking,
    )
    if revoking is not None:
        parts.routes.append(revoking.route())
    return member_app(member.name, parts)


def revocations_of(
    settings: MemberSettings, durable: DurableStore | None = None
) -> Revocations | None:
    """What this member knows of revoked grants, when it trusts issuers at all (kept in
    its database, when it has one)."""
    if not settings.trusted_issuers:
        return None
    store = durable.revocations if durable else None
    return Revocations(settings.trusted_issuers, settings.audiences, store=store)


def push_configs(
    settings: MemberSettings,
    keys: KeySet,
    lookup: TaskLookup,
    telemetry: Telemetry | None = None,
) -> PushConfigs:
    """Push configs whose notifications are signed by the active key, ``iss`` the identity
    that key proves (its RFC 9278 thumbprint URI, :mod:`agent_cards.identity`); each
    delivery observed in ``telemetry`` (the app's)."""
    policy = WebhookPolicy.from_strings(
        settings.push_allowed_networks, allow_public=settings.push_allow_public
    )
    retry = RetryPolicy(
        attempts=settings.push_attempts, first_backoff=settings.push_first_backoff_seconds
    )
    delivery = PushDelivery(
        key=lambda: keys.active,
        issuer=identity_of(keys.active.verification_key()),
        policy=policy,
        retry=retry,
        telemetry=telemetry,
    )
    return PushConfigs(lookup, delivery)


def default_authorize(
    settings: MemberSettings,
    card: AgentCard,
    decisions: DecisionLog,
    replay_guard: ReplayGuard | None = None,
    binding: TaskBinding | None = None,
    witnessed: WitnessedHeads | None = None,
    needs_budget: bool = False,
    revocations: Revocations | None = None,
    proof_replay: ProofReplay | None = None,
) -> Authorize:
    """The ``authorize`` hook the settings imply: the kit's delegation authorizer for the
    skills of ``card`` when issuers are trusted, else :func:`anonymous`; ``binding`` is
    what a continuation is held to (the handoff its task was opened under)."""
    if not settings.trusted_issuers:
        return anonymous
    verifier = DelegationVerifier(
        settings.trusted_issuers,
        settings.audiences,
        replay_guard=replay_guard,
        require_model_budget=needs_budget,
        revocations=revocations,
        proof_replay=proof_replay,
    )
    issuers = settings.trusted_issuers
    directory = issuers if isinstance(issuers, IssuerDirectory) else None
    return delegation_authorizer(
        verifier,
        card,
        decisions=decisions,
        task_binding=binding,
        issuers=directory,
        require_request_digest=settings.require_request_digest,
        witness=head_witness(issuers, witnessed) if witnessed is not None else None,
        public_base_url=settings.public_base_url,
    )


def with_keys(settings: Configured) -> Configured:
    """``settings`` with the card-signing keys its identity is derived from (an in-memory
    key generated when none are given)."""
    if settings.signing_keys is not None:
        return settings
    return replace(settings, signing_keys=KeySet(active=SigningKey.generate()))


def _check_interface_url(card: AgentCard, settings: MemberSettings) -> None:
    interface = card.jsonrpc_interface()
    if interface is None or interface.url != settings.jsonrpc_url:
        raise ConfigurationError("the card's JSON-RPC interface URL must be under public_base_url")


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    public_base_url: str | None = None,
    settings: MemberSettings,
    member: Member,
) -> None:
    """Run ``member``'s service until interrupted (:func:`serve_app`)."""
    serve_app(
        member.name,
        lambda final: create_app(final, member),
        host,
        port,
        public_base_url=public_base_url,
        settings=settings,
    )


def serve_app(
    name: str,
    build: Callable[[Configured], FastAPI],
    host: str,
    port: int,
    *,
    public_base_url: str | None,
    settings: Configured,
) -> None:
    """Run the app ``build`` makes of the final settings (real URL, edge limits, data
    directory) until interrupted; port 0 picks a free port.

    The first line on stdout is ``NAME listening on http://HOST:PORT`` (NAME: ``name``) with the
    real port, printed once the socket accepts connections. The edge's limits are read
    from the variables under ``name``'s prefix (``REMOTE_RISK_*`` for ``remote_risk``,
    :mod:`member_kit.telemetry.names`). The card advertises
    ``public_base_url`` if given, else that listening URL. Every log line, the access
    log's included, goes to stderr, so a parent reading stdout is never blocked by a full
    pipe (see :mod:`member_kit.telemetry.logs`).

    Without a trusted issuer the service would accept any caller, so it refuses to start
    (:class:`ConfigurationError`) unless ``settings.insecure_anonymous`` is set, and then
    says so on stderr. Tasks and used tokens are kept in the database the settings name,
    else in the member's own file in the default data directory.
    """
    names = TelemetryNames.of(name)
    check_secure(settings, names)
    if settings.edge is None:
        edge = limits.member_limits(os.environ, max_body_bytes=settings.max_body_bytes, names=names)
        settings = replace(settings, edge=edge, max_body_bytes=edge.max_body_bytes)
    if settings.database_url is None and settings.data_dir is None:
        settings = replace(settings, data_dir=trust.data_dir(None, os.environ))
    sock = listening_socket(host, port)
    listening_url = f"http://{url_host(host)}:{sock.getsockname()[1]}"
    settings = replace(settings, public_base_url=public_base_url or listening_url)
    try:
        app = build(settings)
    except BaseException:
        sock.close()
        raise
    config = uvicorn.Config(
        app,
        log_level="info",
        access_log=False,
        lifespan="on",
        **uvicorn_options(settings.edge_limits),
    )
    if not settings.trusted_issuers:
        print(insecure_warning(name), file=sys.stderr, flush=True)
    print(f"{name} listening on {listening_url}", flush=True)
    # What the coordinator's operator pins: the card's signing kid and where the keys are.
    kid = app.state.signing_keys.signing_key().kid
    jwks_url = f"{settings.public_base_url}{JWKS_PATH}"
    print(f"card signed with kid {kid}; public keys at {jwks_url}", flush=True)
    logs.adopt_uvicorn()
    collector.settle()
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
