"""Context projection: each recipient gets only the keys it is allowed, as an independent copy.

The copy goes through JSON so that no two recipients share a nested object, and so that
anything that is not plain, finite JSON, or that is larger than the limit, is refused
rather than silently truncated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts import strict_json
from coordinator.errors import ProjectionError

MAX_PROJECTED_BYTES = 64_000


def project_context(
    context: Mapping[str, Any], keys: Sequence[str], limit: int = MAX_PROJECTED_BYTES
) -> dict[str, Any]:
    selected = {key: context[key] for key in keys if key in context}
    try:
        encoded = strict_json.dumps(selected)
    except (TypeError, ValueError) as exc:
        raise ProjectionError(f"context is not plain finite JSON: {exc}") from None
    if len(encoded) > limit:
        raise ProjectionError(f"projected context is {len(encoded)} bytes, over {limit}")
    copied: dict[str, Any] = strict_json.loads(encoded)
    return copied


def record_ids(projected: Mapping[str, Any]) -> frozenset[str]:
    """The ids of the records in a projection: the evidence a recipient can cite."""
    return frozenset(
        value["id"]
        for value in projected.values()
        if isinstance(value, Mapping) and isinstance(value.get("id"), str)
    )
