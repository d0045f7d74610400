"""``GET /metrics``: remote_risk's Prometheus metrics, for whoever holds the metrics token.

The A2A surface takes delegation tokens, which a scraper does not have, so the metrics
have a bearer token of their own (``Settings.metrics_token``, env
``REMOTE_RISK_METRICS_TOKEN``); without one configured the route answers 404 and nothing
is exposed. The token is compared in constant time (both sides hashed first) and never
repeated in an answer.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from remote_risk.telemetry import metrics

METRICS_PATH = "/metrics"
REALM = "remote-risk-metrics"


def _refused(status: int, reason: str, message: str) -> JSONResponse:
    headers = {"Cache-Control": "no-store"}
    if status == 401:
        headers["WWW-Authenticate"] = f'Bearer realm="{REALM}"'
    return JSONResponse({"error": {"reason": reason, "message": message}}, status, headers)


def metrics_route(token: str | None) -> Route:
    expected = hashlib.sha256(token.encode()).digest() if token else None

    async def endpoint(request: Request) -> Response:
        if expected is None:
            return _refused(404, "metrics_disabled", "no metrics token is configured")
        values = request.headers.getlist("authorization")
        scheme, _, presented = (values[0] if len(values) == 1 else "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return _refused(401, "token_missing", "a metrics bearer token is required")
        if not hmac.compare_digest(hashlib.sha256(presented.encode()).digest(), expected):
            return _refused(401, "token_invalid", "the metrics token is not valid")
        return Response(metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})

    return Route(METRICS_PATH, endpoint, methods=["GET"], name="metrics")
