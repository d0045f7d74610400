"""Serve an Agent Card at ``/.well-known/agent-card.json`` the way A2A section 8.6 asks.

The body is fixed when the endpoint is built, so its ETag is a strong validator: the
SHA-256 of the exact bytes sent. ``Cache-Control: max-age`` lets clients reuse the card,
and a conditional GET whose ``If-None-Match`` names the current tag answers 304.
``Last-Modified`` is when the endpoint was built (the card cannot change after that).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from email.utils import format_datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts import strict_json
from contracts.wire import AGENT_CARD_PATH, AgentCard, to_wire

CARD_MEDIA_TYPE = "application/json"


class AgentCardEndpoint:
    """A Starlette endpoint answering GET (and HEAD) with one card."""

    def __init__(self, card: AgentCard, max_age_seconds: int = 300) -> None:
        if max_age_seconds < 0:
            raise ValueError("max_age_seconds cannot be negative")
        self.body = strict_json.dumps(to_wire(card))
        self.etag = f'"{hashlib.sha256(self.body).hexdigest()}"'
        self._headers = {
            "ETag": self.etag,
            "Cache-Control": f"public, max-age={max_age_seconds}",
            "Last-Modified": format_datetime(datetime.now(UTC), usegmt=True),
        }

    async def handle(self, request: Request) -> Response:
        if etag_matches(request.headers.get("if-none-match"), self.etag):
            return Response(status_code=304, headers=self._headers)
        return Response(self.body, media_type=CARD_MEDIA_TYPE, headers=self._headers)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 section 13.1.2: ``*`` or any listed tag equal under weak comparison."""
    if not if_none_match:
        return False
    candidates = [candidate.strip() for candidate in if_none_match.split(",")]
    return "*" in candidates or _opaque(etag) in {_opaque(tag) for tag in candidates}


def _opaque(tag: str) -> str:
    return tag.removeprefix("W/")


def card_route(card: AgentCard, max_age_seconds: int = 300) -> Route:
    """A route serving ``card`` at the well-known path."""
    return Route(
        AGENT_CARD_PATH,
        AgentCardEndpoint(card, max_age_seconds).handle,
        methods=["GET"],
        name="agent_card",
    )
