"""The coordinator's HTTP API: what the CLI does, for a long-lived ``serve coordinator``.

Public routes: ``GET /.well-known/jwks.json`` (the keys remotes pin), ``GET /healthz``
(readiness: a real write to the database commits), ``GET /livez`` (liveness: the process
answers, whatever the database does) and ``GET /openapi.json``. Everything else needs
``Authorization: Bearer <operator token>``
(:class:`~coordinator.service.http.operator_auth.OperatorAuth`, checked before any body is
read). Every route calls :class:`~coordinator.service.facade.CoordinatorService`, the same
facade the CLI uses, and every refusal is ``{"error": {"reason": ..., "message": ...}}``
(:mod:`coordinator.service.http.api_errors`); never a traceback.

The lifespan runs a :class:`~coordinator.recovery.worker.Worker`: its first pass is recovery of the
handoffs a stopped coordinator left in flight, later passes pick up submitted handoffs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Response
from fastapi.security import HTTPBearer

from agent_cards.edge.operator_secret import OperatorSecret
from coordinator.authority import identity
from coordinator.authority.revocation import STATUS_LIST_PREFIX
from coordinator.errors import UsageError
from coordinator.recovery.worker import Worker
from coordinator.remote.wire.client import A2AClient
from coordinator.service import run_list
from coordinator.service.api_models import (
    AgentDetail,
    AgentView,
    AuditCredentialView,
    DelegationDocument,
    ErrorView,
    PendingCard,
    Reconstruction,
    RegistrationView,
    RevocationView,
    RunDocument,
    RunList,
    Submitted,
    VerifyView,
)
from coordinator.service.api_requests import (
    AuditCredentialRequest,
    CancelRequest,
    ConsistencyRequest,
    DelegationRequest,
    RegisterRequest,
    RevokeRequest,
    VerifyRequest,
)
from coordinator.service.artifact_content import artifact_router
from coordinator.service.facade import CoordinatorService
from coordinator.service.http import limits
from coordinator.service.http.api_errors import install_error_handlers
from coordinator.service.http.faults import FaultBarrier
from coordinator.service.http.metrics_route import metrics_router
from coordinator.service.http.operator_auth import OperatorAuth
from coordinator.service.http.public_routes import docs_router, public_router
from coordinator.service.http.request_checks import known_query, strict_body
from coordinator.service.revoke import status_list_router
from coordinator.service.run_list import RunQuery
from coordinator.service.settings import ConfigurationError, CoordinatorSettings
from coordinator.service.token_exchange import exchange_router
from coordinator.storage.delegation_keys import KEY_HELP, SubmissionKey
from coordinator.storage.faults import is_storage_fault, recycle
from coordinator.telemetry.http import ObservedHTTP
from coordinator.workspace import Workspace

logger = logging.getLogger("coordinator.service.http.api")

WORKER_RETRY_SECONDS = 1.0

# Who a cancel through the API is recorded as: the holder of the operator token.
API_OPERATOR = "operator (api)"


class AppExtension(Protocol):
    """Something served beside the API under ``prefix`` that authenticates its own
    requests (the console: a session from the operator token), installed by
    :func:`create_api` with the same service and token."""

    prefix: str

    def install(self, app: FastAPI, service: CoordinatorService, token: OperatorSecret) -> None: ...


def submission_key(header: str | None, request: DelegationRequest) -> SubmissionKey | None:
    """The ``Idempotency-Key`` a delegation was sent under, if any; refused on a request
    driven in place (``"wait": true``), which is never stored to be found again."""
    if header is None:
        return None
    if request.wait:
        raise UsageError(
            'an Idempotency-Key is for a submission ("wait": false) only',
            "idempotency_key_invalid",
        )
    return SubmissionKey.of(header, request.model_dump(mode="json"))


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
    async def delegate(
        body: DelegationRequest,
        response: Response,
        idempotency_key: Annotated[str | None, Header(description=KEY_HELP)] = None,
    ) -> Any:
        """One handoff: with ``wait`` driven here, the run document is the answer;
        without, it is admitted for the background workers (202), once per
        ``Idempotency-Key`` when one is sent."""
        key = submission_key(idempotency_key, body)
        order = await asyncio.to_thread(service.order, body)
        if body.wait:
            return DelegationDocument.model_validate(await service.delegate(order))
        submitted = await asyncio.to_thread(service.submit, order, key)
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
