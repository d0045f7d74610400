"""``GET /metrics``: the coordinator's Prometheus metrics, behind the operator token.

The route is not in ``PUBLIC_PATHS``, so :class:`~coordinator.service.api.OperatorAuth`
guards it like every other operator route (a scraper sends the operator token as a
bearer token). The ledger's chain length is read when the metrics are scraped: one
``max(seq)`` query, so it is right across replicas sharing a database.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from coordinator.storage.schema import audit_events
from coordinator.telemetry import metrics
from coordinator.workspace import Workspace


def chain_length(ws: Workspace) -> int | None:
    try:
        with ws.engine().connect() as connection:
            value = connection.execute(select(func.max(audit_events.c.seq))).scalar()
    except SQLAlchemyError:
        return None
    return int(value or 0)


def metrics_router(ws: Workspace) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics", include_in_schema=False)
    def scrape() -> Response:
        length = chain_length(ws)
        if length is not None:
            metrics.LEDGER_LENGTH.set(length)
        return Response(metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    return router
