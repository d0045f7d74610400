"""How the coordinator's API refuses: one body, ``{"error": {"reason": ..., "message": ...}}``,
with a status from :data:`STATUS_BY_REASON` / :data:`STATUS_BY_ERROR`; never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from coordinator.errors import (
    FederationError,
    OwnershipError,
    ProtocolError,
    RemoteA2AError,
    TransportError,
)
from coordinator.service.http.faults import retry_after

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
    "idempotency_key_invalid": 400,
}
STATUS_BY_ERROR: tuple[tuple[type[FederationError], int], ...] = (
    (TransportError, 502),
    (ProtocolError, 502),
    (RemoteA2AError, 502),
    (OwnershipError, 403),
)
DEFAULT_ERROR_STATUS = 422


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
