"""What every body and query of the ``/v1`` routes is held to before a route reads it:
bounded, strict JSON, and only the query parameters the route names."""

from __future__ import annotations

from fastapi import Request

from contracts import strict_json
from coordinator.errors import UsageError

MAX_BODY_BYTES = 8 * 1024 * 1024


async def strict_body(request: Request) -> None:
    """Refuse a body that is too large or not strict JSON (duplicate keys, NaN)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise UsageError(f"the body is larger than {MAX_BODY_BYTES} bytes", "body_too_large")
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise UsageError(f"the body is larger than {MAX_BODY_BYTES} bytes", "body_too_large")
    if body:
        try:
            strict_json.loads(body)
        except ValueError as exc:
            raise UsageError(f"the body is not strict JSON: {exc}", "body_not_json") from None


def known_query(request: Request) -> None:
    """Refuse query parameters the route does not name (strict, like the bodies)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    named = {param.alias for param in dependant.query_params} if dependant else set()
    keys = [key for key, _ in request.query_params.multi_items()]
    unknown = sorted(set(keys) - named)
    if unknown:
        raise UsageError(f"unknown query parameter {unknown[0]!r}", "unknown_parameter")
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise UsageError(f"query parameter {repeated[0]!r} given twice", "repeated_parameter")
