"""``GET /metrics``: one member app's Prometheus metrics, for whoever holds the metrics token.

The A2A surface takes delegation tokens, which a scraper does not have, so the metrics
have a bearer token of their own (``Settings.metrics_token``; remote_risk reads it from
``REMOTE_RISK_METRICS_TOKEN``, a member from ``<ITS_NAME>_METRICS_TOKEN``); without one
configured the route answers 404 and nothing is exposed. The token is compared in
constant time (both sides hashed first) and never repeated in an answer. The answer
holds this app's registry only (its member's names), whatever else runs in the process.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_cards.edge.operator_token import OperatorToken
from member_kit.telemetry.metrics import CONTENT_TYPE
from member_kit.telemetry.observed import Telemetry

METRICS_PATH = "/metrics"


def metrics_route(token: str | None, telemetry: Telemetry) -> Route:
    guard = OperatorToken(token, telemetry.names.metrics_realm, "metrics_disabled")
    metrics = telemetry.metrics

    async def endpoint(request: Request) -> Response:
        refused = guard.refusal(request)
        if refused is not None:
            return refused
        return Response(metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    return Route(METRICS_PATH, endpoint, methods=["GET"], name="metrics")
