"""The coordinator's routes open to anyone: its public keys, readiness and liveness, and
the API's reference rendered from its OpenAPI document."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, JSONResponse

from coordinator.authority import identity
from coordinator.service.api_models import ErrorView, Health
from coordinator.service.http.reference import render_reference
from coordinator.storage.health import probe_write
from coordinator.workspace import Workspace

JWKS_MAX_AGE_SECONDS = 300


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
