"""``GET /healthz`` (readiness) and ``GET /livez`` (liveness) of the risk service.

Readiness commits one real write to the service's database (the ``health_probe`` row of
the counters table set to the time in milliseconds: a write that changes nothing would
not touch the file), so it answers 503 ``storage_unavailable`` with
``Retry-After`` exactly when tasks cannot be stored; a service keeping its tasks in
memory is always ready. Liveness only says that the process answers.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_cards.storage.faults import RETRY_AFTER_SECONDS
from member_kit.storage.engine import driver_sql, driver_write
from member_kit.storage.faults import is_storage_fault
from member_kit.storage.schema import counters

logger = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
LIVENESS_PATH = "/livez"
PROBE_COUNTER = "health_probe"
_PROBE = (
    f"INSERT INTO {counters.name} (name, value) VALUES ('{PROBE_COUNTER}', :now) "
    "ON CONFLICT (name) DO UPDATE SET value = :now"
)


def probe_write(engine: Engine) -> None:
    with driver_write(engine) as cursor:
        cursor.execute(driver_sql(engine, _PROBE), {"now": time.time_ns() // 1000})


def health_routes(engine: Engine | None) -> list[Route]:
    async def healthz(request: Request) -> JSONResponse:
        if engine is not None:
            try:
                probe_write(engine)
            except Exception as exc:
                if not is_storage_fault(exc):
                    raise
                logger.warning("readiness: the database does not take writes (%s)", exc)
                engine.dispose()  # fresh connections once it is back
                body = {
                    "error": {
                        "reason": "storage_unavailable",
                        "message": "the database does not take writes; retry later",
                    }
                }
                headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
                return JSONResponse(body, status_code=503, headers=headers)
        return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})

    async def livez(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})

    return [
        Route(HEALTH_PATH, healthz, methods=["GET"], name="healthz"),
        Route(LIVENESS_PATH, livez, methods=["GET"], name="livez"),
    ]
