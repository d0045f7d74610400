"""The member's revocation endpoint and its status-list poller.

``POST /revocations`` takes a signed push (the compact JWS as the body, see
:mod:`member_kit.trust.revocation`): refused with ``{"reason", "detail"}`` and the
reason's status, or applied: every unfinished task opened under a revoked grant is
cancelled, and the answer names them (``{"revoked": n, "cancelled": [task ids]}``).

The poller fetches, every ``poll_seconds``, each status list that a grant this member
still watches names, and applies it the same way: the fallback when a push was lost
(the member was down, the network dropped it). A list that cannot be fetched or is
refused is logged with its reason and tried again at the next poll; what the member
knew stays known.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards import tls
from agent_cards.edge.rate_limited_log import RateLimitedLog
from member_kit.trust.revocation import (
    MAX_DOCUMENT_BYTES,
    RevocationReason,
    RevocationRefused,
    Revocations,
    Watched,
)

logger = logging.getLogger("member_kit.revocation")
# refused pushes come from anyone: a bounded number of lines per reason
_refusals = RateLimitedLog(logger)

REVOCATION_PATH = "/revocations"
STATUS_LIST_MEDIA_TYPE = "application/statuslist+jwt"
FETCH_TIMEOUT_SECONDS = 5.0

# Cancels the unfinished tasks of one owner (those opened under one grant, see
# member_kit.tasks.record.task_owner): the ids of those it cancelled.
CancelUnder = Callable[[str], Awaitable[list[str]]]


class RevocationEndpoint:
    """Applies pushes and polled status lists to ``revocations``; ``cancel_under`` stops
    the tasks opened under one grant."""

    def __init__(
        self, revocations: Revocations, cancel_under: CancelUnder, poll_seconds: float
    ) -> None:
        self.revocations = revocations
        self._cancel_under = cancel_under
        self._poll_seconds = poll_seconds

    def route(self) -> Route:
        return Route(REVOCATION_PATH, self.push, methods=["POST"], name="revocations")

    async def push(self, request: Request) -> Response:
        body = await request.body()
        try:
            text = body.decode("ascii").strip() if len(body) <= MAX_DOCUMENT_BYTES else None
            grants = self.revocations.accept_push(text)
        except (UnicodeDecodeError, RevocationRefused) as exc:
            refused = exc if isinstance(exc, RevocationRefused) else _malformed()
            reason = refused.reason.value
            _refusals.log(logging.WARNING, reason, "revocation push refused: %s", reason)
            detail = {"reason": refused.reason.value, "detail": refused.detail}
            return JSONResponse(detail, status_code=refused.http_status)
        cancelled = await self.cancel(grants)
        logger.info("revocation push: %d grants revoked, cancelled %s", len(grants), cancelled)
        return JSONResponse({"revoked": len(grants), "cancelled": cancelled})

    async def cancel(self, revoked: Iterable[Watched]) -> list[str]:
        cancelled: list[str] = []
        for watched in revoked:
            cancelled += await self._cancel_under(watched.owner)
        return cancelled

    async def poll_forever(self) -> None:
        async with httpx.AsyncClient(
            timeout=FETCH_TIMEOUT_SECONDS, trust_env=False, verify=tls.verified()
        ) as client:
            while True:
                try:
                    await self.poll_once(client)
                except Exception:  # a fault here must not end the polling: logged, tried again
                    logger.exception("status list poll failed; trying again at the next poll")
                await asyncio.sleep(self._poll_seconds)

    async def poll_once(self, client: httpx.AsyncClient) -> list[str]:
        """Fetch and apply every watched status list once; the tasks it cancelled."""
        cancelled: list[str] = []
        for uri in sorted(self.revocations.status_lists()):
            try:
                token = await _fetch(client, uri)
                grants = self.revocations.apply_status_list(uri, token)
            except RevocationRefused as exc:
                logger.warning("status list %s refused: %s", uri, exc.reason.value)
                continue
            except (httpx.HTTPError, ValueError) as exc:
                logger.warning("status list %s not fetched: %s", uri, type(exc).__name__)
                continue
            cancelled += await self.cancel(grants)
        if cancelled:
            logger.info("status list: tasks cancelled: %s", cancelled)
        return cancelled


async def _fetch(client: httpx.AsyncClient, uri: str) -> str:
    headers = {"Accept": STATUS_LIST_MEDIA_TYPE}
    async with client.stream("GET", uri, headers=headers) as response:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code}")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_DOCUMENT_BYTES:
                raise ValueError("the status list is too large")
    return body.decode("ascii").strip()


def _malformed() -> RevocationRefused:
    return RevocationRefused(RevocationReason.MALFORMED, "the body is not ASCII")
