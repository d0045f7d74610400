"""What the API answers when something fails below it, on a connection that stays usable.

:class:`FaultBarrier` wraps the whole app (inside Starlette's outermost error middleware,
which would send a 500 and then re-raise, so that uvicorn drops the kept-alive
connection):

* a storage fault (:func:`~coordinator.storage.faults.is_storage_fault`) is answered 503
  ``storage_unavailable`` with ``Retry-After``, and the database's pooled connections are
  recycled so that the next request starts on fresh ones;
* any other unexpected error is logged with its traceback and answered 500
  ``internal_error``, never with the exception's text;
* either way the exception stops here, so the connection is kept for the next request.

If the response had already started when the error came, the exception goes on up and
the server closes the connection: half a response must not be followed by another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.storage.faults import RETRY_AFTER_SECONDS, is_storage_fault

logger = logging.getLogger("coordinator.service.http.faults")


def storage_unavailable(message: str = "the database is unavailable; retry later") -> JSONResponse:
    """503 ``storage_unavailable`` with ``Retry-After``: nothing was changed, try again."""
    body = {"error": {"reason": "storage_unavailable", "message": message}}
    return JSONResponse(body, status_code=503, headers=retry_after())


def retry_after() -> dict[str, str]:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)}


def internal_error() -> JSONResponse:
    body = {"error": {"reason": "internal_error", "message": "the coordinator failed; see its log"}}
    return JSONResponse(body, status_code=500)


class FaultBarrier:
    """Answer a failure below with 503 (storage) or 500 (a bug), keeping the connection."""

    def __init__(self, app: ASGIApp, on_storage_fault: Callable[[], None]) -> None:
        self.app = app
        self._on_storage_fault = on_storage_fault

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            await self._answer(exc)(scope, receive, send)

    def _answer(self, exc: Exception) -> JSONResponse:
        if is_storage_fault(exc):
            logger.warning("storage fault, answered 503: %s: %s", type(exc).__name__, exc)
            try:
                self._on_storage_fault()
            except Exception:
                logger.exception("recycling the database connections failed")
            return storage_unavailable()
        logger.error("unexpected error, answered 500", exc_info=exc)
        return internal_error()
