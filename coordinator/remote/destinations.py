"""Where the coordinator may send a request for an agent: the one rule every path obeys.

A card is a document its author wrote, so the hosts it names are claims, not permission.
The coordinator sends to an agent's interface only when that interface is on the card's
own origin (the ``card_url`` the operator gave at registration) or on an origin the
operator allowed for that agent by name (``federation register ... --allow-origin URL``,
recorded with the agent). Origins are compared by authority, ``host:port`` (the default
port of the scheme filled in; a gRPC ``host:port`` without a scheme as written), since
that is where the bytes go.

:func:`check_card` runs at registration: every interface the card lists must be allowed,
and none may be the endpoint, or on the origin, of another registered agent (a card
naming another agent's address is refused even when that origin is allowed); an agent is
another when its identity (the key its card verified with) differs, so one agent may be
registered under two names.
:func:`check_destination` runs before any transport for an agent is made
(:func:`coordinator.remote.bindings.transport_for`), so sends, reads, cancels, streams,
subscriptions and the extended card fetch all go through it, and no byte leaves for a host
the rule does not allow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from contracts.wire import AgentCard
from coordinator.errors import RegistryError

DESTINATION_NOT_ALLOWED = "destination_not_allowed"
INTERFACE_OFF_ORIGIN = "interface_off_origin"
INTERFACE_OF_OTHER_AGENT = "interface_of_other_agent"
ORIGIN_INVALID = "origin_invalid"
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}


@dataclass(frozen=True)
class Destinations:
    """The authorities one agent's requests may go to: its card's origin and the operator's
    allowances for it."""

    card_url: str
    allowed: tuple[str, ...] = ()

    def authorities(self) -> frozenset[str]:
        return frozenset({authority_of(self.card_url), *map(authority_of, self.allowed)})

    def allows(self, url: str) -> bool:
        return _authority_or_none(url) in self.authorities()


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
        return frozenset({authority_of(self.card_url), *map(authority_of, self.endpoints)})


def authority_of(url: str) -> str:
    """``host:port`` of ``url`` (lower-case host, the scheme's default port filled in), or
    a :class:`RegistryError` (``origin_invalid``) when it names no host."""
    found = _authority_or_none(url)
    if found is None:
        raise RegistryError(f"{_shown(url)} names no host", ORIGIN_INVALID)
    return found


def _authority_or_none(url: str) -> str | None:
    text = url if "://" in url else "//" + url
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    port = port or DEFAULT_PORTS.get(parts.scheme.lower())
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def check_destination(url: str, destinations: Destinations) -> None:
    """Refuse (``destination_not_allowed``) a request to ``url`` for an agent whose card
    origin and allowances do not include it; nothing has been sent when this raises."""
    if not destinations.allows(url):
        raise RegistryError(
            f"{_shown(url)} is neither the card's origin nor an origin the operator allowed "
            "for this agent (register it with --allow-origin); nothing was sent",
            DESTINATION_NOT_ALLOWED,
        )


def check_card(card: AgentCard, destinations: Destinations, others: Iterable[Neighbour]) -> None:
    """Every interface of ``card`` is allowed for it and belongs to no other registered
    agent; else a :class:`RegistryError` (``interface_of_other_agent``,
    ``interface_off_origin``)."""
    own = authority_of(destinations.card_url)
    neighbours = list(others)
    for interface in card.supported_interfaces:
        _check_not_theirs(interface.url, own, neighbours)
        if not destinations.allows(interface.url):
            raise RegistryError(
                f"the card's interface {_shown(interface.url)} is off the card's origin; "
                "the operator allows another origin with --allow-origin URL",
                INTERFACE_OFF_ORIGIN,
            )


def _check_not_theirs(url: str, own: str, neighbours: list[Neighbour]) -> None:
    authority = _authority_or_none(url)
    for other in neighbours:
        named = url in other.endpoints or (authority != own and authority in other.authorities())
        if named:
            raise RegistryError(
                f"the card's interface {_shown(url)} is an address of the registered agent "
                f"{other.name!r}",
                INTERFACE_OF_OTHER_AGENT,
            )


def _shown(url: str) -> str:
    """``url`` fit for a one-line message: printable, and cut short."""
    printable = "".join(ch if ch.isprintable() else "?" for ch in url)
    return repr(printable[:200])
