"""What both services' Prometheus metrics share: buckets, bounded labels, the exposition.

Each service keeps its own registry and metric names (``federation_*``,
``remote_risk_*``). Names carry their unit (``_seconds``, ``_total``) and every label has
a bounded set of values: a value that could be anything (free text, a caller's made-up
method) is written ``other``, so no request can grow a series.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "children", "code_label", "exposition", "known_label"]

Metric = TypeVar("Metric", bound=MetricWrapperBase)

CONTENT_TYPE = CONTENT_TYPE_LATEST
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
OTHER = "other"
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def code_label(code: str | None) -> str:
    """A reason code as a label value: codes only (``dispatch_failed:token_invalid``),
    ``none`` for no code, ``other`` for anything that looks like free text."""
    if not code:
        return "none"
    return code if _CODE.fullmatch(code) else OTHER


def known_label(value: str | None, known: Collection[str]) -> str:
    """``value`` if it is one of ``known``, else ``other``."""
    return value if value is not None and value in known else OTHER


def exposition(registry: CollectorRegistry) -> bytes:
    """What ``GET /metrics`` answers with: ``registry`` in the Prometheus text format."""
    return generate_latest(registry)


def children(metric: Metric) -> Callable[..., Metric]:
    """``metric.labels``, each child looked up once and kept: a request's count then skips
    the metric's lock and checks. As bounded as the metric's own series, since every
    label has a bounded set of values."""
    known: dict[tuple[str, ...], Metric] = {}

    def child(*values: str) -> Metric:
        found = known.get(values)
        if found is None:
            found = known[values] = metric.labels(*values)
        return found

    return child
