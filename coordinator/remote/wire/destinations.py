"""Where the coordinator may send a request for an agent: the one rule every path obeys.

A card is a document its author wrote, so the hosts it names are claims, not permission.
The coordinator sends to an agent's interface only when that interface is on the card's
own origin (the ``card_url`` the operator gave at registration) or on an origin the
operator allowed for that agent by name (``federation register ... --allow-origin URL``,
recorded with the agent). Origins are compared by authority, ``host:port`` (the default
port of the scheme filled in; a gRPC ``host:port`` without a scheme as written), since
that is where the bytes go; the host in one spelling per address
(:func:`~coordinator.remote.wire.endpoints.canonical_host`). A GRPC interface is read as the
channel will dial it (:func:`~coordinator.remote.wire.endpoints.grpc_target`): gRPC's own
target syntax is refused (``grpc_target_invalid``), never parsed as a URL.

:func:`check_card` runs at registration: every interface the card lists must be allowed,
and none may be the endpoint, or on the origin, of another registered agent (a card
naming another agent's address is refused even when that origin is allowed); addresses
are compared as the endpoints a dialer reaches (:func:`check_card_resolved` looks the
names up first), not as spellings. An agent is another when its identity (the key its
card verified with) differs, so one agent may be registered under two names. The
refusal names the agent that holds the address; the operator may give it to the card
being registered by naming that agent (``--take-address-from NAME``), which then leaves
the registry.
:func:`check_destination` runs before any transport for an agent is made
(:func:`coordinator.remote.wire.bindings.transport_for`), so sends, reads, cancels, streams,
subscriptions and the extended card fetch all go through it, and no byte leaves for a host
the rule does not allow.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from contracts.wire import AgentCard
from coordinator.errors import RegistryError
from coordinator.remote.wire.endpoints import (
    DEFAULT_PORTS,
    AddressBook,
    canonical_host,
    grpc_target,
    joined,
    resolved,
)
from coordinator.remote.wire.transport import GRPC, JSONRPC

DESTINATION_NOT_ALLOWED = "destination_not_allowed"
INTERFACE_OFF_ORIGIN = "interface_off_origin"
INTERFACE_OF_OTHER_AGENT = "interface_of_other_agent"
ADDRESS_NOT_HELD = "address_not_held"
ORIGIN_INVALID = "origin_invalid"


@dataclass(frozen=True)
class Destinations:
    """The authorities one agent's requests may go to: its card's origin and the operator's
    allowances for it."""

    card_url: str
    allowed: tuple[str, ...] = ()

    def authorities(self) -> frozenset[str]:
        return frozenset({authority_of(self.card_url), *map(authority_of, self.allowed)})

    def allows(self, url: str, binding: str = JSONRPC) -> bool:
        return dialed_authority(url, binding) in self.authorities()


@dataclass(frozen=True)
class Neighbour:
    """Another registered agent: its name, the endpoints its card lists and its origin,
    and its identity (None: unknown), by which the same agent under another name is told
    from a card pointing at someone else."""

    name: str
    card_url: str
    endpoints: tuple[str, ...]
    identity: str | None = None

    def authorities(self) -> frozenset[str]:
        found = (_authority_or_none(url) for url in (self.card_url, *self.endpoints))
        return frozenset(authority for authority in found if authority is not None)


def authority_of(url: str) -> str:
    """``host:port`` of ``url`` (the host in its canonical spelling, the scheme's default
    port filled in), or a :class:`RegistryError` (``origin_invalid``) when it names no host."""
    found = _authority_or_none(url)
    if found is None:
        raise RegistryError(f"{_shown(url)} names no host", ORIGIN_INVALID)
    return found


def allowances(before: Iterable[str], given: Iterable[str]) -> tuple[str, ...]:
    """The origins allowed for an agent: those given now and those allowed ``before``,
    each as ``host:port`` (``origin_invalid`` when one names no host)."""
    return tuple(sorted({*before, *(authority_of(origin) for origin in given)}))


def dialed_authority(url: str, binding: str) -> str | None:
    """The ``host:port`` a transport of ``binding`` dials for ``url`` (None: no host); a
    GRPC URL outside the forms A2A allows raises ``grpc_target_invalid``."""
    if binding == GRPC:
        return grpc_target(url).authority
    return _authority_or_none(url)


@functools.lru_cache(maxsize=1024)
def _authority_or_none(url: str) -> str | None:
    """A function of the text alone, kept per URL: every send checks its destination
    (:func:`check_destination`), always against the same few URLs."""
    text = url if "://" in url else "//" + url
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return joined(canonical_host(host), port or DEFAULT_PORTS.get(parts.scheme.lower()))


def check_destination(url: str, destinations: Destinations, binding: str = JSONRPC) -> None:
    """Refuse (``destination_not_allowed``) a request to ``url`` for an agent whose card
    origin and allowances do not include it; nothing has been sent when this raises."""
    if not destinations.allows(url, binding):
        raise RegistryError(
            f"{_shown(url)} is neither the card's origin nor an origin the operator allowed "
            "for this agent (register it with --allow-origin); nothing was sent",
            DESTINATION_NOT_ALLOWED,
        )


async def check_card_resolved(
    card: AgentCard,
    destinations: Destinations,
    others: Iterable[Neighbour],
    ceded: str | None = None,
) -> Neighbour | None:
    """:func:`check_card`, with every host name the card, its origin and the other agents
    name looked up first, as the dialer would."""
    neighbours = list(others)
    named = [destinations.card_url, *(i.url for i in card.supported_interfaces)]
    found = (_authority_or_none(url) for url in named)
    mine = {authority for authority in found if authority is not None}
    theirs = (authority for other in neighbours for authority in other.authorities())
    book = await resolved({*mine, *theirs})
    return check_card(card, destinations, neighbours, book, ceded)


def check_card(
    card: AgentCard,
    destinations: Destinations,
    others: Iterable[Neighbour],
    book: AddressBook | None = None,
    ceded: str | None = None,
) -> Neighbour | None:
    """Every interface of ``card`` is allowed for it and belongs to no other registered
    agent, addresses compared through ``book`` (``host:port`` -> the endpoints a dialer
    reaches; without it, as canonical spellings); else a :class:`RegistryError`
    (``grpc_target_invalid``, ``interface_of_other_agent``, ``interface_off_origin``).
    The agent named ``ceded`` (the operator's ``--take-address-from``) may hold them: it
    is returned, to leave the registry; ``address_not_held`` when it holds none."""
    places = _Places(book or {})
    own = places.of(authority_of(destinations.card_url))
    neighbours = list(others)
    holders = set[str]()
    for interface in card.supported_interfaces:
        dialed = dialed_authority(interface.url, interface.protocol_binding)
        holders |= _holders(interface.url, places.of(dialed), own, neighbours, places)
    taken = _ceded(holders, neighbours, ceded)
    for interface in card.supported_interfaces:
        if not destinations.allows(interface.url, interface.protocol_binding):
            raise RegistryError(
                f"the card's interface {_shown(interface.url)} is off the card's origin; "
                "the operator allows another origin with --allow-origin URL",
                INTERFACE_OFF_ORIGIN,
            )
    return taken


def _ceded(holders: set[str], neighbours: list[Neighbour], ceded: str | None) -> Neighbour | None:
    held = sorted(holders - {ceded} if ceded else holders)
    if held:
        raise RegistryError(
            f"the card names an address of the registered agent {held[0]!r}; to give it to "
            f"this agent, register it with --take-address-from {held[0]}",
            INTERFACE_OF_OTHER_AGENT,
        )
    if ceded is None:
        return None
    if ceded not in holders:
        raise RegistryError(
            f"no address this card names is held by an agent named {ceded!r}", ADDRESS_NOT_HELD
        )
    return next(other for other in neighbours if other.name == ceded)


class _Places:
    """``host:port`` -> the endpoints a dialer reaches for it (itself when not looked up)."""

    def __init__(self, book: AddressBook) -> None:
        self._book = book

    def of(self, authority: str | None) -> frozenset[str]:
        if authority is None:
            return frozenset()
        return self._book.get(authority, frozenset({authority}))

    def of_all(self, authorities: Iterable[str]) -> frozenset[str]:
        return frozenset().union(*(self.of(authority) for authority in authorities))

    def same(self, url: str, here: frozenset[str], endpoint: str) -> bool:
        """Whether ``url`` (reaching ``here``) is ``endpoint``: one place, one path."""
        return bool(self.of(_authority_or_none(endpoint)) & here) and _path(endpoint) == _path(url)


def _holders(
    url: str, here: frozenset[str], own: frozenset[str], others: list[Neighbour], places: _Places
) -> set[str]:
    """The other agents ``url`` names an address of: one of their endpoints (the same
    place and path), or their origin when that is not this card's own."""
    found = set[str]()
    for other in others:
        same = any(places.same(url, here, endpoint) for endpoint in other.endpoints)
        if same or (not here & own and here & places.of_all(other.authorities())):
            found.add(other.name)
    return found


def _path(url: str) -> str:
    try:
        path = urlsplit(url if "://" in url else "//" + url).path
    except ValueError:
        return url
    return path.rstrip("/")


def _shown(url: str) -> str:
    """``url`` fit for a one-line message: printable, and cut short."""
    printable = "".join(ch if ch.isprintable() else "?" for ch in url)
    return repr(printable[:200])
