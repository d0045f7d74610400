"""The one address policy for push notification webhooks.

:func:`host_address` reads a URL host as an address the way a resolver would: IPv6
literals (brackets and a zone allowed), IPv4 in every spelling ``inet_aton`` accepts
(``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``), with one trailing dot ignored;
anything else is a DNS name. :class:`AddressPolicy` then judges an address, after
looking through every IPv6 form that carries an IPv4 address (IPv4-mapped,
IPv4-translated, IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo
``2001::/32``): such an address is allowed only if every IPv4 address inside it is.

An address is allowed when it lies in a network the operator listed, or, when public
delivery is on, when it is globally routable by :mod:`ipaddress` and not multicast, nor
in a range :mod:`ipaddress` still counts as global on some Python versions
(site-local ``fec0::/10``, local-use NAT64 ``64:ff9b:1::/48``, the transition prefixes
themselves).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
NEVER_PUBLIC: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(network)
    for network in (
        "fec0::/10",  # site-local (deprecated, RFC 3879)
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): the IPv4 inside is not at a fixed place
        "64:ff9b::/96",  # NAT64 well-known prefix: judged by the IPv4 inside
        "2002::/16",  # 6to4: judged by the IPv4 inside
        "2001::/32",  # Teredo: judged by the IPv4 addresses inside
        "::/96",  # IPv4-compatible (deprecated): judged by the IPv4 inside
        "::ffff:0:0/96",  # IPv4-mapped: judged by the IPv4 inside
        "::ffff:0:0:0/96",  # IPv4-translated: judged by the IPv4 inside
    )
)


def ipv4_any_spelling(text: str) -> ipaddress.IPv4Address | None:
    """``text`` as ``inet_aton`` reads it (1 to 4 parts, decimal, octal or hex), or None."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.fullmatch(part) for part in parts):
        return None
    values = [_number(part) for part in parts]
    *head, last = values
    if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
        return None
    number = sum(value << (8 * (3 - index)) for index, value in enumerate(head)) + last
    return ipaddress.IPv4Address(number)


def _number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if part.startswith("0") and len(part) > 1:
        return int(part, 8)
    return int(part)


def host_address(host: str) -> IPAddress | None:
    """The address a URL host spells (see the module docstring), or None for a name."""
    text = host.strip("[]")
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return ipv4_any_spelling(text)


def is_localhost_name(host: str) -> bool:
    """``localhost`` and every name under it (RFC 6761 section 6.3), any case, a dot or not."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address carries (empty for plain addresses)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64 or address in _TRANSLATED or (address in _COMPATIBLE and int(address) > 1):
        found.append(low)
    return found


def is_public(address: IPAddress) -> bool:
    return (
        address.is_global
        and not address.is_multicast
        and not any(address in network for network in NEVER_PUBLIC)
    )


@dataclass(frozen=True)
class AddressPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    allow_public: bool = True

    @classmethod
    def from_strings(cls, networks: Iterable[str], *, allow_public: bool = True) -> AddressPolicy:
        return cls(tuple(ipaddress.ip_network(n, strict=False) for n in networks), allow_public)

    def allows(self, address: IPAddress) -> bool:
        """Whether a webhook may be sent to ``address`` (looking through embedded IPv4)."""
        inside = embedded_ipv4(address)
        if inside:
            return all(self._allows_plain(each) for each in inside)
        return self._allows_plain(address)

    def _allows_plain(self, address: IPAddress) -> bool:
        if any(
            address.version == network.version and address in network
            for network in self.allowed_networks
        ):
            return True
        return self.allow_public and is_public(address)
