"""``GET /metrics``: remote_risk's Prometheus metrics, for whoever holds the metrics token.

The A2A surface takes delegation tokens, which a scraper does not have, so the metrics
have a bearer token of their own (``Settings.metrics_token``, env
``REMOTE_RISK_METRICS_TOKEN``); without one configured the route answers 404 and nothing
is exposed. The token is compared in constant time (both sides hashed first) and never
repeated in an answer.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_cards.edge.operator_token import OperatorToken
from member_kit.telemetry import metrics

METRICS_PATH = "/metrics"
REALM = "remote-risk-metrics"


def metrics_route(token: str | None) -> Route:
    guard = OperatorToken(token, REALM, "metrics_disabled")

    async def endpoint(request: Request) -> Response:
        refused = guard.refusal(request)
        if refused is not None:
            return refused
        return Response(metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    return Route(METRICS_PATH, endpoint, methods=["GET"], name="metrics")
