"""Where a URL sends its bytes: the host and port a transport dials, and when two
spellings are one place.

* :func:`grpc_target`: a GRPC interface's URL in the forms A2A gives it (``host:port``,
  or ``grpc://``, ``grpcs://``, ``http://``, ``https://`` with an authority and nothing
  after it) as the host, port and TLS choice the channel dials; every other form (gRPC's
  own target syntax: ``dns://server/name``, ``dns:``, ``ipv4:``, ``unix:``, ``xds:``...;
  a path, user info, a query) is refused (``grpc_target_invalid``), since the host gRPC
  connects to would not be the host a URL parser sees. The channel is then opened on
  ``dns:///host:port`` built from the checked parts, never on the card's text.
* :func:`canonical_host`: one spelling per IP address (``127.1``, ``2130706433``,
  ``0x7f.0.0.1`` and ``[::ffff:127.0.0.1]`` are ``127.0.0.1``), host names in lower case
  without a trailing dot.
* :func:`resolved`: the addresses a dialer reaches for each ``host:port`` (names looked up
  as the dialer would, through the system resolver; a name that does not resolve stands
  for itself), so that two spellings of one endpoint are seen as one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from coordinator.errors import RegistryError

GRPC_TARGET_INVALID = "grpc_target_invalid"
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}
# scheme -> TLS, for a GRPC interface's URL
GRPC_SCHEMES = {"grpc": False, "http": False, "grpcs": True, "https": True}
_AUTHORITY = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}))?")
_NUMERIC_V4 = re.compile(r"[0-9a-fA-FxX.]+")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# ``host:port`` -> the endpoints a dialer reaches for it (see :func:`resolved`)
AddressBook = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class GrpcTarget:
    """What a gRPC channel for an interface dials: a canonical host, a port, TLS or not."""

    host: str
    port: int
    tls: bool

    @property
    def authority(self) -> str:
        return joined(self.host, self.port)

    @property
    def target(self) -> str:
        """The channel target: the DNS resolver's form, from the checked parts only."""
        return "dns:///" + self.authority


def grpc_target(url: str) -> GrpcTarget:
    """The host, port and TLS choice of a GRPC interface's URL, or ``grpc_target_invalid``."""
    scheme, separator, rest = url.partition("://")
    if separator:
        tls = GRPC_SCHEMES.get(scheme.lower())
        default = DEFAULT_PORTS.get(scheme.lower())
        if tls is None:
            raise _invalid(url, f"scheme {scheme[:20]!r} is not grpc, grpcs, http or https")
        authority = rest[:-1] if rest.endswith("/") else rest
    else:
        tls, default, authority = None, None, url
    found = _AUTHORITY.fullmatch(authority)
    if found is None:
        raise _invalid(url, "only host:port is allowed after the scheme")
    host = canonical_host(found["host"])
    port = int(found["port"]) if found["port"] else default
    if port is None or not 0 < port < 65536:
        raise _invalid(url, "a port from 1 to 65535 is required")
    return GrpcTarget(host, port, tls if tls is not None else not is_loopback(host))


def _invalid(url: str, why: str) -> RegistryError:
    printable = "".join(ch if ch.isprintable() else "?" for ch in url[:200])
    return RegistryError(
        f"the gRPC interface {printable!r} is not one A2A allows: {why}", GRPC_TARGET_INVALID
    )


def canonical_host(host: str) -> str:
    """One spelling per address: an IP literal in any form as its plain address (an
    IPv4-mapped IPv6 address as the IPv4 one), a name in lower case without a final dot."""
    name = host.strip("[]").lower()
    name = name[:-1] if name.endswith(".") else name
    address = ip_literal(name)
    return str(address) if address is not None else name


def ip_literal(name: str) -> IPAddress | None:
    """The address ``name`` spells, as a resolver reads it (``127.1``, ``2130706433``,
    ``0x7f.1``), or None for a host name."""
    try:
        address: IPAddress = ipaddress.ip_address(name)
    except ValueError:
        if not _NUMERIC_V4.fullmatch(name):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_loopback(host: str) -> bool:
    address = ip_literal(host)
    return host == "localhost" if address is None else address.is_loopback


def joined(host: str, port: int | None) -> str:
    """``host:port`` with an IPv6 address in brackets (``host`` alone without a port)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


async def resolved(authorities: Iterable[str]) -> dict[str, frozenset[str]]:
    """For each ``host:port``: itself and, for a host name, every ``address:port`` the
    system resolver gives for it (what a dialer would try); nothing more when it does not
    resolve. Lookups run off the event loop."""
    wanted = sorted(set(authorities))
    found = await asyncio.gather(*(_addresses(authority) for authority in wanted))
    return dict(zip(wanted, found, strict=True))


async def _addresses(authority: str) -> frozenset[str]:
    host, _, port = authority.rpartition(":")
    if not host or not port.isdigit() or ip_literal(host.strip("[]")) is not None:
        return frozenset({authority})
    try:
        answers = await asyncio.get_running_loop().getaddrinfo(
            host, int(port), type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError):
        return frozenset({authority})
    addresses = {joined(canonical_host(str(answer[4][0])), int(port)) for answer in answers}
    return frozenset({authority, *addresses})
