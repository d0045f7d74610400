"""The coordinator's HTTP API: what the CLI does, for a long-lived ``serve coordinator``.

Public routes: ``GET /.well-known/jwks.json`` (the keys remotes pin), ``GET /healthz``
(readiness: a real write to the database commits), ``GET /livez`` (liveness: the process
answers, whatever the database does) and ``GET /openapi.json``. Everything else needs
``Authorization: Bearer <operator token>``
(:class:`OperatorAuth`, checked before any body is read). Every route calls
:class:`~coordinator.service.facade.CoordinatorService`, the same facade the CLI uses, and every
refusal is ``{"error": {"reason": ..., "message": ...}}`` with a status from
:data:`STATUS_BY_REASON` / :data:`STATUS_BY_ERROR`; never a traceback.

The lifespan runs a :class:`~coordinator.recovery.worker.Worker`: its first pass is recovery of the
handoffs a stopped coordinator left in flight, later passes pick up submitted handoffs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_cards.edge.operator_secret import OperatorSecret
from agent_cards.edge.throttle import (
    THROTTLED,
    THROTTLED_MESSAGE,
    FailureThrottle,
    retry_after_header,
)
from contracts import strict_json
from coordinator.authority import identity
from coordinator.authority.revocation import STATUS_LIST_PREFIX
from coordinator.errors import (
    FederationError,
    OwnershipError,
    ProtocolError,
    RemoteA2AError,
    TransportError,
    UsageError,
)
from coordinator.recovery.worker import Worker
from coordinator.remote.client import A2AClient
from coordinator.service import limits, run_list
from coordinator.service.api_models import (
    AgentDetail,
    AgentView,
    AuditCredentialRequest,
    AuditCredentialView,
    CancelRequest,
    ConsistencyRequest,
    DelegationDocument,
    DelegationRequest,
    ErrorView,
    Health,
    PendingCard,
    Reconstruction,
    RegisterRequest,
    RegistrationView,
    RevocationView,
    RevokeRequest,
    RunDocument,
    RunList,
    Submitted,
    VerifyRequest,
    VerifyView,
)
from coordinator.service.artifact_content import artifact_router
from coordinator.service.facade import CoordinatorService
from coordinator.service.faults import FaultBarrier, retry_after
from coordinator.service.metrics_route import metrics_router
from coordinator.service.reference import render_reference
from coordinator.service.revoke import status_list_router
from coordinator.service.run_list import RunQuery
from coordinator.service.settings import ConfigurationError, CoordinatorSettings
from coordinator.service.token_exchange import EXCHANGE_PATH, exchange_router
from coordinator.storage.faults import is_storage_fault, recycle
from coordinator.storage.health import probe_write
from coordinator.telemetry import http
from coordinator.telemetry.http import ObservedHTTP
from coordinator.workspace import Workspace

logger = logging.getLogger("coordinator.service.api")

PUBLIC_PATHS = frozenset(
    {"/healthz", "/livez", "/.well-known/jwks.json", "/openapi.json", "/docs"}
    # authenticated by what the holder presents (its token and a proof by its key)
    | {EXCHANGE_PATH}
)
REALM = "federation-coordinator"
JWKS_MAX_AGE_SECONDS = 300
MAX_BODY_BYTES = 8 * 1024 * 1024
WORKER_RETRY_SECONDS = 1.0

STATUS_BY_REASON: dict[str, int] = {
    "unknown_run": 404,
    "unknown_agent": 404,
    "unknown_head": 404,
    "unknown_artifact": 404,
    "artifact_not_kept": 404,
    "artifact_hash_mismatch": 409,
    "ledger_broken": 409,
    "run_ended": 409,
    "no_pending_card": 409,
    "card_unreachable": 502,
    "card_not_json": 502,
    "jwks_unavailable": 502,
    "storage_unavailable": 503,
}
STATUS_BY_ERROR: tuple[tuple[type[FederationError], int], ...] = (
    (TransportError, 502),
    (ProtocolError, 502),
    (RemoteA2AError, 502),
    (OwnershipError, 403),
)
DEFAULT_ERROR_STATUS = 422
# Who a cancel through the API is recorded as: the holder of the operator token.
API_OPERATOR = "operator (api)"


def error_response(
    status: int, reason: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = {"error": {"reason": reason, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def status_of(error: FederationError) -> int:
    if error.reason in STATUS_BY_REASON:
        return STATUS_BY_REASON[error.reason]
    for kind, status in STATUS_BY_ERROR:
        if isinstance(error, kind):
            return status
    return DEFAULT_ERROR_STATUS


class AppExtension(Protocol):
    """Something served beside the API under ``prefix`` that authenticates its own
    requests (the console: a session from the operator token), installed by
    :func:`create_api` with the same service and token."""

    prefix: str

    def install(self, app: FastAPI, service: CoordinatorService, token: OperatorSecret) -> None: ...


class OperatorAuth:
    """Refuse every request outside :data:`PUBLIC_PATHS` without the operator's token.

    What is right, wrong or throttled is
    :meth:`~agent_cards.edge.operator_secret.OperatorSecret.judge`, the one rule of both
    services: the right token always passes; a wrong one from an address, or of a
    fingerprint, that failed too often is refused 429 (``token_throttled``). No answer
    repeats the token. Paths under ``exempt_prefixes`` belong to an :class:`AppExtension`
    that checks them itself.
    """

    def __init__(
        self, app: ASGIApp, token: OperatorSecret, exempt_prefixes: Sequence[str] = ()
    ) -> None:
        self.app = app
        self._token = token
        self._exempt = tuple(exempt_prefixes)
        self._failures = FailureThrottle()

    def exempt(self, path: str) -> bool:
        if path in PUBLIC_PATHS:
            return True
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self._exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.exempt(scope["path"]) or not routed(scope):
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else ""
        values = [v for k, v in scope["headers"] if k == b"authorization"]
        refusal = self.refusal(values, client)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await refusal(scope, receive, send)

    def refusal(self, values: list[bytes], client: str = "") -> JSONResponse | None:
        if not values:
            return self._unauthorized("token_missing", "an operator bearer token is required")
        if len(values) > 1:
            return self._unauthorized("token_malformed", "send one Authorization header")
        scheme, _, presented = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not presented or b" " in presented:
            return self._unauthorized("token_malformed", "expected Authorization: Bearer TOKEN")
        judged = self._token.judge(presented, client, self._failures)
        if judged.retry_after is not None:
            http.note(denial_reason=THROTTLED)
            wait = retry_after_header(judged.retry_after)
            return error_response(429, THROTTLED, THROTTLED_MESSAGE, wait)
        if not judged.passed:
            return self._unauthorized("token_invalid", "the operator token is not valid")
        return None

    @staticmethod
    def _unauthorized(reason: str, message: str) -> JSONResponse:
        http.note(denial_reason=reason)
        challenge = f'Bearer realm="{REALM}"'
        if reason != "token_missing":
            challenge += ', error="invalid_token"'
        headers = {"WWW-Authenticate": challenge, "Cache-Control": "no-store"}
        return error_response(401, reason, message, headers)


def routed(scope: Scope) -> bool:
    """Whether the path is one the app serves, by any method. A path it does not serve is
    answered 404 ``not_found`` to anyone, token or not (a 401 there read as an auth
    problem); a path it serves needs the token before anything else, so an
    unauthenticated caller learns only which paths exist, which the public
    ``/openapi.json`` lists already, never whether a run or an agent does."""
    router = getattr(scope.get("app"), "router", None)
    if router is None:
        return True  # cannot tell: guarded
    return any(route.matches(scope)[0] is not Match.NONE for route in router.routes)


async def strict_body(request: Request) -> None:
    """Refuse a body that is too large or not strict JSON (duplicate keys, NaN)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise UsageError(f"the body is larger than {MAX_BODY_BYTES} bytes", "body_too_large")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise UsageError(f"the body is larger than {MAX_BODY_BYTES} bytes", "body_too_large")
    if body:
        try:
            strict_json.loads(body)
        except ValueError as exc:
            raise UsageError(f"the body is not strict JSON: {exc}", "body_not_json") from None


def known_query(request: Request) -> None:
    """Refuse query parameters the route does not name (strict, like the bodies)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    named = {param.alias for param in dependant.query_params} if dependant else set()
    keys = [key for key, _ in request.query_params.multi_items()]
    unknown = sorted(set(keys) - named)
    if unknown:
        raise UsageError(f"unknown query parameter {unknown[0]!r}", "unknown_parameter")
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise UsageError(f"query parameter {repeated[0]!r} given twice", "repeated_parameter")


def api_router(service: CoordinatorService) -> APIRouter:
    """The ``/v1`` routes; the bearer dependency only documents what OperatorAuth enforces."""
    router = APIRouter(
        prefix="/v1",
        dependencies=[
            Depends(HTTPBearer(auto_error=False, description="operator token")),
            Depends(known_query),
        ],
        responses={
            400: {"model": ErrorView, "description": "the body is not JSON"},
            401: {"model": ErrorView, "description": "no or wrong operator token"},
            422: {"model": ErrorView, "description": "bad input"},
        },
    )
    body_checked = [Depends(strict_body)]

    @router.post("/agents", dependencies=body_checked, tags=["agents"])
    async def register(body: RegisterRequest) -> RegistrationView:
        """Fetch, verify and keep an agent card (``federation register``)."""
        return await service.register(body)

    @router.get("/agents", tags=["agents"])
    def agents() -> list[AgentView]:
        """The registered agents (``federation agents``)."""
        return service.agents()

    @router.get("/pending-cards", tags=["agents"])
    def pending() -> list[PendingCard]:
        """Changed cards held for approval, each with what it asks for beyond the
        registered one (``federation agents pending``)."""
        return service.pending()

    @router.delete(
        "/pending-cards/{name}",
        tags=["agents"],
        responses={404: {"model": ErrorView}, 409: {"model": ErrorView}},
    )
    def refuse_pending(name: str) -> AgentView:
        """Refuse the card held for an agent: it is dropped, the registered card stays; the
        answer is the agent as registered."""
        return service.refuse_pending(name)

    @router.get("/agents/{name}", tags=["agents"], responses={404: {"model": ErrorView}})
    def agent(name: str) -> AgentDetail:
        """One registered agent: card, pins, skills and scopes, declared return contracts
        and any held card (``federation agents show``)."""
        return service.agent_detail(name)

    @router.delete("/agents/{name}", tags=["agents"], responses={404: {"model": ErrorView}})
    def remove_agent(name: str) -> AgentView:
        """Forget a registered agent; the answer is what was removed (``federation agents
        remove``)."""
        return service.remove_agent(name)

    @router.put(
        "/agents/{name}/audit-credential",
        dependencies=body_checked,
        tags=["agents"],
        responses={404: {"model": ErrorView}},
    )
    def set_audit_credential(name: str, body: AuditCredentialRequest) -> AuditCredentialView:
        """The token of this agent's audit routes (``federation agents audit-credential``):
        sent by reconcile only to the origin it is registered from; never answered back."""
        return AuditCredentialView(**service.set_audit_credential(name, body.token))

    @router.delete(
        "/agents/{name}/audit-credential", tags=["agents"], responses={404: {"model": ErrorView}}
    )
    def remove_audit_credential(name: str) -> AuditCredentialView:
        """Forget this agent's audit token (``agents audit-credential NAME --remove``)."""
        return AuditCredentialView(**service.remove_audit_credential(name))

    @router.post(
        "/delegations",
        dependencies=body_checked,
        tags=["delegations"],
        response_model=None,
        responses={
            200: {"model": DelegationDocument, "description": "driven here to its end"},
            202: {"model": Submitted, "description": "submitted; the workers drive it"},
            404: {"model": ErrorView, "description": "unknown agent"},
            502: {"model": ErrorView, "description": "the remote failed"},
        },
    )
    async def delegate(body: DelegationRequest, response: Response) -> Any:
        """One handoff: with ``wait`` driven here, the run document is the answer;
        without, it is admitted for the background workers (202)."""
        order = await asyncio.to_thread(service.order, body)
        if body.wait:
            return DelegationDocument.model_validate(await service.delegate(order))
        submitted = await asyncio.to_thread(service.submit, order)
        response.status_code = 202
        response.headers["Location"] = f"/v1/runs/{submitted.run_id}"
        return submitted.model_dump()

    @router.get("/runs", tags=["runs"])
    def runs(
        state: str | None = Query(
            None, min_length=1, description="live, cancelled, finished or a state"
        ),
        since: Annotated[
            str | None,
            Query(
                min_length=1,
                description="ISO 8601 / RFC 3339: runs started at or after it",
                json_schema_extra={"format": "date-time"},
            ),
        ] = None,
        limit: int = Query(50, ge=1, le=run_list.MAX_LIMIT),
        cursor: str | None = Query(
            None, min_length=1, description="next_cursor of the previous page"
        ),
    ) -> RunList:
        """Run summaries, newest first, one page at a time (``federation runs``)."""
        return service.runs(RunQuery(state, since, limit, cursor))

    @router.get("/runs/{run_id}", tags=["runs"], responses={404: {"model": ErrorView}})
    def run(run_id: str) -> RunDocument:
        """One run's document (``federation run show``), live or finished."""
        return RunDocument.model_validate(service.run(run_id))

    router.include_router(artifact_router(service.artifact))

    @router.post(
        "/runs/{run_id}/cancel",
        dependencies=body_checked,
        tags=["runs"],
        responses={
            404: {"model": ErrorView, "description": "unknown run"},
            409: {"model": ErrorView, "description": "the run has no live branch to cancel"},
            502: {"model": ErrorView, "description": "the coordinator's key or a card failed"},
        },
    )
    async def cancel(run_id: str, body: CancelRequest | None = None) -> RunDocument:
        """Cancel every live branch of the run (``federation cancel``): CancelTask to each
        remote under a token for that handoff; who and why are recorded. The answer is the
        run's document."""
        reason = body.reason if body is not None else None
        return RunDocument.model_validate(await service.cancel(run_id, reason, API_OPERATOR))

    @router.post(
        "/revocations",
        dependencies=body_checked,
        tags=["runs"],
        responses={404: {"model": ErrorView, "description": "unknown run or handoff"}},
    )
    async def revoke(body: RevokeRequest) -> RevocationView:
        """Revoke the grants of a run or a handoff (``federation revoke``): a ledger event,
        the live branches under them cancelled, and a signed push to each member; a
        member the push misses learns it from the status list its tokens name."""
        revocation = await service.revoke(body.target, body.reason, API_OPERATOR)
        return RevocationView.model_validate(revocation)

    @router.post("/audit/verify", dependencies=body_checked, tags=["audit"])
    def audit_verify(body: VerifyRequest | None = None) -> VerifyView:
        """Check the ledger's hash chain, or the bundle given (``federation audit verify``)."""
        return service.audit_verify(body.bundle if body is not None else None)

    @router.get("/audit/runs/{run_id}", tags=["audit"], responses={404: {"model": ErrorView}})
    def audit_show(run_id: str) -> Reconstruction:
        """A run rebuilt from the ledger alone (``federation audit show``)."""
        return Reconstruction.model_validate(service.audit_show(run_id))

    @router.get(
        "/audit/runs/{run_id}/export", tags=["audit"], responses={404: {"model": ErrorView}}
    )
    def audit_export(run_id: str) -> dict[str, Any]:
        """A self-contained bundle of the run's events with a signed head."""
        return service.audit_export(run_id)

    @router.post(
        "/audit/runs/{run_id}/prove",
        tags=["audit"],
        responses={404: {"model": ErrorView}, 409: {"model": ErrorView}},
    )
    def audit_prove(run_id: str) -> dict[str, Any]:
        """The run's proof bundle against a tree head signed now (``federation audit prove``)."""
        return service.audit_prove(run_id)

    @router.post(
        "/audit/consistency",
        dependencies=body_checked,
        tags=["audit"],
        responses={404: {"model": ErrorView}},
    )
    def audit_consistency(body: ConsistencyRequest) -> dict[str, Any]:
        """Whether one signed tree head extends another (``federation audit consistency``)."""
        return service.audit_consistency(body.first, body.second)

    @router.post(
        "/audit/runs/{run_id}/reconcile",
        tags=["audit"],
        responses={
            404: {"model": ErrorView},
            409: {"model": ErrorView},
            422: {"model": ErrorView},
            502: {"model": ErrorView},
        },
    )
    def audit_reconcile(run_id: str) -> dict[str, Any]:
        """Both sides of each handoff compared, and each log against the heads the other
        holds (``federation audit reconcile``; each agent asked with its own audit
        credential, at its registered origin). ``verdict`` is ``agree``, ``disagree``
        (each handoff names its ``differing`` fields) or ``not_checked`` (``not_checked``
        lists each agent's reason: audit_credential_missing, agent_keeps_no_receipts,
        remote_audit_not_found, remote_unavailable, ...); 200 whichever it is."""
        return service.audit_reconcile(run_id)

    return router


def public_router(ws: Workspace) -> APIRouter:
    router = APIRouter(tags=["public"])

    @router.get("/.well-known/jwks.json")
    def jwks() -> JSONResponse:
        """The coordinator's public signing keys: what a remote pins as its issuer."""
        document = identity.coordinator_keys(ws.data).public_jwks()
        headers = {"Cache-Control": f"public, max-age={JWKS_MAX_AGE_SECONDS}"}
        return JSONResponse(document, headers=headers)

    @router.get("/healthz", responses={503: {"model": ErrorView}})
    def healthz() -> Health:
        """Readiness: a real write to the database commits (503 with Retry-After if not)."""
        probe_write(ws.engine())
        return Health(status="ok")

    @router.get("/livez")
    async def livez() -> Health:
        """Liveness: the process serves requests (the database is not consulted)."""
        return Health(status="ok")

    return router


def docs_router(app: FastAPI) -> APIRouter:
    router = APIRouter(tags=["public"])

    @router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        """The API's reference, rendered here from its OpenAPI document (no scripts, no
        assets from elsewhere: it works offline)."""
        return HTMLResponse(render_reference(app.openapi()))

    return router


async def keep_working(worker: Worker) -> None:
    """Run the worker until stopped; a failed pass is logged and retried (after a storage
    fault on fresh database connections)."""
    while not worker.stopping.is_set():
        try:
            await worker.run()
        except Exception as exc:
            if is_storage_fault(exc):
                logger.warning("the worker met a storage fault (%s); retrying", exc)
                recycle(worker.ws.engine())
            else:
                logger.exception("the worker failed; retrying in %s s", WORKER_RETRY_SECONDS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.stopping.wait(), WORKER_RETRY_SECONDS)


def install_error_handlers(app: FastAPI) -> None:
    async def federation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FederationError)
        status = status_of(exc)
        return error_response(
            status, exc.reason, str(exc), retry_after() if status == 503 else None
        )

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
        where = ".".join(str(part) for part in first["loc"]) or "request"
        return error_response(422, "invalid_request", f"{where}: {first['msg']}")

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        reasons = {400: "body_not_json", 404: "not_found", 405: "method_not_allowed"}
        reason = reasons.get(exc.status_code, "http_error")
        return error_response(exc.status_code, reason, str(exc.detail), exc.headers)

    app.add_exception_handler(FederationError, federation_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    # Anything else (a storage fault, a bug) is answered by FaultBarrier, see create_api.


def create_api(
    ws: Workspace, settings: CoordinatorSettings, extensions: Sequence[AppExtension] = ()
) -> FastAPI:
    """The coordinator's app over ``ws``; refuses to exist without an operator token.
    ``extensions`` (the console) are installed beside the API."""
    token = OperatorSecret(settings.required_token("the coordinator API"))
    if settings.issuer != identity.issuer_id():
        raise ConfigurationError(
            f"the issuer must be set through {identity.ISSUER_ENV}", "issuer_mismatch"
        )
    keys = identity.coordinator_keys(ws.data)
    worker = Worker(ws, keys, settings.issuer, lease_seconds=settings.worker_lease_seconds)
    service = CoordinatorService(ws)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        working = asyncio.create_task(keep_working(worker))
        # One pooled client for every delegation this process drives while it serves.
        async with A2AClient() as client:
            service.client = client
            try:
                yield
            finally:
                service.client = None
                worker.stop()
                await working

    app = FastAPI(
        title="a2a-federation coordinator",
        version="1",
        description=(__doc__ or "").split("\n\n")[0],
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.include_router(public_router(ws))
    app.include_router(status_list_router(ws))
    app.include_router(docs_router(app))
    app.include_router(api_router(service))
    app.include_router(exchange_router(ws))
    app.include_router(metrics_router(ws))
    install_error_handlers(app)
    limits.install(app, limits.coordinator_limits())
    app.add_middleware(
        OperatorAuth,
        token=token,
        # the status lists are public, like the JWK Set: members fetch them without a token
        exempt_prefixes=[STATUS_LIST_PREFIX, *(extension.prefix for extension in extensions)],
    )
    # Outermost of ours, so that a failure anywhere below keeps the connection usable.
    app.add_middleware(FaultBarrier, on_storage_fault=lambda: recycle(ws.engine()))
    # outermost: requests refused or failed below get their span and access line
    app.add_middleware(ObservedHTTP)
    # last, so that what an extension wraps its own paths with sees every answer there
    for extension in extensions:
        extension.install(app, service, token)
    app.state.worker = worker
    return app
