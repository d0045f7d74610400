"""``GET /metrics``: the coordinator's Prometheus metrics, behind the operator token.

The route is not in ``PUBLIC_PATHS``, so
:class:`~coordinator.service.http.operator_auth.OperatorAuth` guards it like every other
operator route (a scraper sends the operator token as a bearer token). The ledger's
chain length and the handoffs by state are read from the database when the metrics are
scraped (a ``max(seq)`` and a ``group by``), so they are right across replicas sharing a
database and count the handoffs a CLI process drove. So are the runs and handoffs in
flight (:data:`LIVE_RUNS`, :data:`LIVE_HANDOFFS`): counted from the stored handoff
records, the facts every run view derives from, whichever process drives them. The
counters are this process's own, and their HELP text says so.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import Gauge
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from contracts.handoff import TERMINAL_STATES
from coordinator.storage.schema import audit_events, handoffs
from coordinator.telemetry import metrics
from coordinator.workspace import Workspace

LIVE_RUNS = Gauge(
    "federation_runs_live",
    "Runs with a handoff in flight in the database, whichever process drives them.",
    registry=metrics.REGISTRY,
)
LIVE_HANDOFFS = Gauge(
    "federation_handoffs_live",
    "Handoffs in flight in the database, whichever process drives them.",
    registry=metrics.REGISTRY,
)
_ENDED = [state.value for state in TERMINAL_STATES]


def chain_length(ws: Workspace) -> int | None:
    try:
        with ws.engine().connect() as connection:
            value = connection.execute(select(func.max(audit_events.c.seq))).scalar()
    except SQLAlchemyError:
        return None
    return int(value or 0)


def handoff_states(ws: Workspace) -> dict[str, int] | None:
    query = select(handoffs.c.state, func.count()).group_by(handoffs.c.state)
    try:
        with ws.engine().connect() as connection:
            return {str(state): int(count) for state, count in connection.execute(query)}
    except SQLAlchemyError:
        return None


def count_live(ws: Workspace) -> None:
    """Set the live gauges from the stored handoff records (left as they were if the
    database cannot be read)."""
    query = select(func.count(func.distinct(handoffs.c.run_id)), func.count()).where(
        handoffs.c.state.not_in(_ENDED)
    )
    try:
        with ws.engine().connect() as connection:
            row = connection.execute(query).one()
    except SQLAlchemyError:
        return
    LIVE_RUNS.set(int(row[0]))
    LIVE_HANDOFFS.set(int(row[1]))


def metrics_router(ws: Workspace) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics", include_in_schema=False)
    def scrape() -> Response:
        length = chain_length(ws)
        if length is not None:
            metrics.LEDGER_LENGTH.set(length)
        states = handoff_states(ws)
        if states is not None:
            metrics.recorded_handoffs(states)
        count_live(ws)
        return Response(metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    return router
