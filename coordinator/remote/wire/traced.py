"""Spans (and latency) of the A2A calls the client makes, and ``traceparent`` on each.

A plain call's span is the current one while it runs, so :meth:`A2AClient.exchange`
injects its context; a stream's span is never made current (an async generator runs in
its consumer's context between events), so its context is injected into the stream's
request headers here. Attributes are the RPC and HTTP semantic conventions'; the
endpoint's host and port, never a header.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from types import MappingProxyType
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind

from coordinator.telemetry import metrics, tracing


@functools.lru_cache(maxsize=1024)
def target_of(endpoint: str) -> str:
    """``host:port`` of an endpoint: the bounded label a remote is counted under (worked
    out once per endpoint: every call to a remote asks it)."""
    if "://" not in endpoint:  # a gRPC target is host:port already
        return endpoint
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname or 'unknown'}:{port}"


# The ``rpc.system`` of each binding (HTTP+JSON has no RPC convention of its own).
RPC_SYSTEMS = {"JSONRPC": "jsonrpc", "GRPC": "grpc", "HTTP+JSON": "a2a_http_json"}


@functools.lru_cache(maxsize=1024)
def _attributes(
    method: str, endpoint: str, binding: str = "JSONRPC"
) -> Mapping[str, tracing.Attribute | None]:
    """A call's span attributes, worked out once per method, endpoint and binding (read
    only: each span copies what it keeps)."""
    return MappingProxyType(_attributes_of(method, endpoint, binding))


def _attributes_of(method: str, endpoint: str, binding: str) -> dict[str, tracing.Attribute | None]:
    if binding == "GRPC":
        host, _, port = endpoint.rpartition(":")
        return {
            "rpc.system": "grpc",
            "rpc.service": "lf.a2a.v1.A2AService",
            "rpc.method": method,
            "server.address": host or endpoint,
            "server.port": int(port) if port.isdigit() else None,
        }
    parts = urlsplit(endpoint)
    return {
        "rpc.system": RPC_SYSTEMS.get(binding, binding.lower()),
        "rpc.service": "a2a",
        "rpc.method": method,
        "rpc.jsonrpc.version": "2.0" if binding == "JSONRPC" else None,
        "http.request.method": "POST" if binding == "JSONRPC" else None,
        "server.address": parts.hostname,
        "server.port": parts.port,
        "url.path": parts.path or "/",
    }


@contextmanager
def remote_call(method: str, endpoint: str, binding: str = "JSONRPC") -> Iterator[None]:
    """The current span of one call (its context is what gets injected)."""
    started = time.perf_counter()
    outcome = "error"
    attributes = _attributes(method, endpoint, binding)
    try:
        with tracing.span(f"a2a/{method}", attributes, kind=SpanKind.CLIENT):
            yield
            outcome = "ok"
    finally:
        metrics.observe_remote_call(method, target_of(endpoint), outcome, started)


@contextmanager
def remote_stream(
    method: str, endpoint: str, headers: MutableMapping[str, str], binding: str = "JSONRPC"
) -> Iterator[None]:
    """A stream's span, not made current; its ``traceparent`` goes into ``headers``."""
    attributes = _attributes(method, endpoint, binding)
    span = tracing.start_span(f"a2a/{method}", attributes, kind=SpanKind.CLIENT)
    tracing.inject_for(span, headers)
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    except BaseException as exc:
        span.set_attribute("error.type", type(exc).__name__)
        raise
    finally:
        span.end()
        metrics.observe_remote_call(method, target_of(endpoint), outcome, started)
