"""The coordinator's API behind the bounded HTTP edge.

Order of the checks on a request: the connection limits of :mod:`agent_cards.edge.protocol`
(header bytes and time, body time, connections per client and in total; set where
:func:`coordinator.service.http.server.serve` starts uvicorn), then the operator token
(:class:`~coordinator.service.http.operator_auth.OperatorAuth`, from the headers alone), then
:class:`agent_cards.edge.body.BodyGuard` (at most ``max_body_bytes`` streamed in, 413; a JSON
body in UTF-8, within the depth and the I-JSON number range, else 422), then the route.

The limits are :class:`agent_cards.edge.limits.EdgeLimits` read from ``FEDERATION_*`` variables
(see the README's "Limits"); the body limit defaults to 8 MiB here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp

from agent_cards.edge.body import BodyGuard
from agent_cards.edge.limits import EdgeLimits

ENV_PREFIX = "FEDERATION_"
MAX_BODY_BYTES = 8 * 1024 * 1024


def coordinator_limits(environ: Mapping[str, str] | None = None) -> EdgeLimits:
    """The defaults (an 8 MiB body), then every ``FEDERATION_*`` limit variable."""
    base = EdgeLimits(max_body_bytes=MAX_BODY_BYTES)
    return EdgeLimits.from_env(ENV_PREFIX, os.environ if environ is None else environ, base)


def refusal(status: int, reason: str, message: str) -> ASGIApp:
    """The API's error document, asking to close the connection (the body may still come)."""
    body = {"error": {"reason": reason, "message": message}}
    return JSONResponse(body, status_code=status, headers={"Connection": "close"})


def install(app: FastAPI, limits: EdgeLimits) -> None:
    """Put ``app``'s routes behind the body guard; add it before the operator check, so
    that the token is checked first."""
    app.add_middleware(BodyGuard, limits=limits, refuse=refusal)
