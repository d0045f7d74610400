"""The limits of the HTTP edge: defaults, checks, and reading them from the environment.

Every limit has a documented default (README, section "Limits") and can be set through an
environment variable ``PREFIX + NAME`` (the coordinator's prefix is ``FEDERATION_``,
remote_risk's ``REMOTE_RISK_``), e.g. ``FEDERATION_MAX_HEADER_BYTES=32768``.

JSON numbers are held to I-JSON (RFC 7493 section 2.2): an integer beyond
``+-(2**53 - 1)`` or a number that does not fit an IEEE 754 double (``1e400``) is refused
rather than rounded or turned into ``null``. That range is not settable: it is what both
sides (and RFC 8785, which canonicalises our signed documents) can represent exactly.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from agent_cards.edge.errors import LimitsError
from contracts.strict_json import MAX_DEPTH

MAX_SAFE_INTEGER = 2**53 - 1


@dataclass(frozen=True)
class EdgeLimits:
    """What one service's HTTP edge allows; see the README's "Limits" table."""

    # bytes of request line and header fields of one request; 431 past it
    max_header_bytes: int = 16 * 1024
    # seconds from a request's first byte (or the connection's start) to its last header
    header_timeout_seconds: float = 10.0
    # seconds from the end of the headers to the last byte of the body
    body_timeout_seconds: float = 30.0
    # seconds an idle keep-alive connection is kept
    keep_alive_seconds: float = 5.0
    # bytes of one request body, counted as it streams in; 413 past it
    max_body_bytes: int = 1_000_000
    # nesting of arrays and objects in a JSON body; at most what every parser allows
    max_json_depth: int = MAX_DEPTH
    # open connections in total, and from one client address
    max_connections: int = 1024
    max_connections_per_client: int = 128
    # proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (addresses or
    # networks); none by default, so a client's forwarded headers are ignored
    trusted_proxies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for address in self.trusted_proxies:
            _check_proxy(address)
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "trusted_proxies":
                continue
            if not value > 0:
                raise LimitsError(f"{item.name} must be positive, not {value!r}")
        if self.max_json_depth > MAX_DEPTH:
            raise LimitsError(f"max_json_depth cannot exceed {MAX_DEPTH}, what every parser allows")
        if self.max_connections_per_client > self.max_connections:
            raise LimitsError("max_connections_per_client cannot exceed max_connections")

    @classmethod
    def from_env(
        cls, prefix: str, environ: Mapping[str, str], base: EdgeLimits | None = None
    ) -> EdgeLimits:
        """``base`` (else the defaults) with every ``PREFIX + NAME`` variable set on top."""
        limits = base or cls()
        changes: dict[str, Any] = {}
        for item in fields(cls):
            variable = prefix + item.name.upper()
            text = environ.get(variable)
            if text is None or not text.strip():
                continue
            changes[item.name] = _parsed(item.name, variable, text)
        return replace(limits, **changes)

    def variables(self, prefix: str) -> dict[str, str]:
        """Each limit's environment variable and its value (for documentation and tests)."""
        return {
            prefix + item.name.upper(): _shown(getattr(self, item.name)) for item in fields(self)
        }


def _parsed(name: str, variable: str, text: str) -> Any:
    if name == "trusted_proxies":
        return tuple(part.strip() for part in text.split(",") if part.strip())
    kind = float if name.endswith("_seconds") else int
    try:
        return kind(text)
    except ValueError:
        raise LimitsError(f"{variable}={text!r} is not a number") from None


def _shown(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _check_proxy(address: str) -> None:
    """A trusted proxy is named by its address or network; never ``*`` (anyone)."""
    try:
        ipaddress.ip_network(address, strict=False)
    except ValueError:
        raise LimitsError(f"trusted proxy {address!r} is not an IP address or network") from None
