"""Trusted issuers whose keys follow a rotation: an issuer given by URL is fetched again.

:class:`IssuerDirectory` is the ``issuer -> TrustedKeys`` mapping the verifier reads. For
an issuer configured with an ``http(s)://`` JWK Set (read once at start, see
:mod:`member_kit.trust.issuers`) it fetches that set again

* when a token names a kid the issuer's keys lack (:meth:`IssuerDirectory.refresh` with
  ``unknown_kid``), so a key published and activated at once is picked up on first use;
* when the cached set has expired: its ``Cache-Control: max-age`` (or ``no-cache`` /
  ``no-store``: at once; none: :data:`DEFAULT_MAX_AGE_SECONDS`), refreshed in the
  background of the request that notices (:meth:`IssuerDirectory.refresh_expired`);

but at most once per ``min_interval`` seconds per issuer (``REMOTE_RISK_JWKS_MIN_REFRESH_SECONDS``,
default 10), with ``If-None-Match`` when the server gave an ``ETag``. A refresh that
fails (unreachable, not 200, too large, or a set outside the profile, e.g. a kid that is
not its thumbprint) keeps the last good set and is logged with its reason; one refresh
is in flight per issuer at a time. Issuers read from a file never change.

Anyone may name any kid under a trusted issuer, so a stranger's token can spend the
refresh of an interval just before the issuer's real new key is first used. That refresh
is not lost to the issuer: after a token naming a kid the keys lack is refused,
:meth:`IssuerDirectory.retry_after` makes sure a fetch starts after that refusal, at the
end of the current interval at the latest (in the background, whoever asks meanwhile),
and says how long the refused caller should wait for it. A stranger can so delay a new
key by one interval at most, and make no more fetches than one per interval.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_cards import tls
from agent_cards.keys import KeyMaterialError, TrustedKeys
from contracts.strict_json import StrictJSONError

logger = logging.getLogger(__name__)

MIN_REFRESH_ENV_VAR = "REMOTE_RISK_JWKS_MIN_REFRESH_SECONDS"
DEFAULT_MIN_INTERVAL_SECONDS = 10.0
DEFAULT_MAX_AGE_SECONDS = 300.0
MAX_CACHE_SECONDS = 86_400.0
FETCH_TIMEOUT_SECONDS = 5.0
# Added to the wait a refused caller is told: time for the due fetch to be made.
RETRY_MARGIN_SECONDS = 1.0
MAX_JWKS_BYTES = 64 * 1024
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)\s*(?:,|$)", re.IGNORECASE)


@dataclass(frozen=True)
class Fetched:
    status: int
    body: bytes
    headers: Mapping[str, str]


Fetch = Callable[[str, str | None], Awaitable[Fetched]]


async def fetch(url: str, etag: str | None) -> Fetched:
    """GET ``url``: no redirect followed, at most ``MAX_JWKS_BYTES``, a short timeout."""
    headers = {"Accept": "application/json", **({"If-None-Match": etag} if etag else {})}
    async with (
        httpx.AsyncClient(
            timeout=FETCH_TIMEOUT_SECONDS,
            follow_redirects=False,
            trust_env=False,
            verify=tls.verified(),
        ) as client,
        client.stream("GET", url, headers=headers) as response,
    ):
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_JWKS_BYTES:
                raise ValueError(f"larger than {MAX_JWKS_BYTES} bytes")
        return Fetched(response.status_code, bytes(body), dict(response.headers))


def fresh_for(headers: Mapping[str, str], min_interval: float) -> float:
    """Seconds a fetched set may be reused, from its ``Cache-Control``."""
    control = next((v for k, v in headers.items() if k.lower() == "cache-control"), "")
    lowered = control.lower()
    if "no-store" in lowered or "no-cache" in lowered:
        return 0.0
    match = _MAX_AGE.search(control)
    max_age = float(match.group(1)) if match else DEFAULT_MAX_AGE_SECONDS
    return max(min_interval, min(max_age, MAX_CACHE_SECONDS))


@dataclass
class IssuerSource:
    """One issuer's keys and, for a URL source, when they may or must be fetched again."""

    keys: TrustedKeys
    url: str | None = None
    fetched_at: float = 0.0
    fresh_until: float = 0.0
    etag: str | None = None
    last_attempt: float = 0.0
    lock: asyncio.Lock | None = field(default=None, repr=False)
    # The fetch due after a refused unknown kid (see IssuerDirectory.retry_after).
    due: asyncio.Task[None] | None = field(default=None, repr=False)


class IssuerDirectory(Mapping[str, TrustedKeys]):
    """``issuer -> TrustedKeys``, refreshed from the issuer's URL (see the module doc)."""

    def __init__(
        self,
        sources: Mapping[str, IssuerSource],
        *,
        min_interval: float = DEFAULT_MIN_INTERVAL_SECONDS,
        fetcher: Fetch = fetch,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_interval < 0:
            raise ValueError("min_interval cannot be negative")
        self._sources = dict(sources)
        self._min_interval = min_interval
        self._fetch = fetcher
        self._clock = clock
        self._background: set[asyncio.Task[Any]] = set()
        self.version = 0  # bumped whenever an issuer's keys change

    def __getitem__(self, issuer: str) -> TrustedKeys:
        return self._sources[issuer].keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    def refreshable(self, issuer: str) -> bool:
        source = self._sources.get(issuer)
        return source is not None and source.url is not None

    def may_refresh(self, issuer: str, *, unknown_kid: bool) -> bool:
        source = self._sources.get(issuer)
        if source is None or source.url is None:
            return False
        now = self._clock()
        if now - source.last_attempt < self._min_interval:
            return False
        return unknown_kid or now >= source.fresh_until

    async def refresh(self, issuer: str, *, unknown_kid: bool = False) -> bool:
        """Fetch the issuer's set again if allowed now; whether its keys changed. While
        a refresh of the issuer is in flight, wait for it instead (the caller compares
        :attr:`version` to see whether it brought new keys); one that started before
        this call may hold a set older than what the caller was refused against, so the
        set is then fetched again if allowed."""
        source = self._sources.get(issuer)
        if source is None or source.url is None:
            return False
        if source.lock is None:
            source.lock = asyncio.Lock()
        if source.lock.locked():
            asked_at = self._clock()
            async with source.lock:
                if source.last_attempt >= asked_at:
                    return False
        if not self.may_refresh(issuer, unknown_kid=unknown_kid):
            return False
        async with source.lock:
            if not self.may_refresh(issuer, unknown_kid=unknown_kid):
                return False
            source.last_attempt = self._clock()
            return self._apply(issuer, source, await self._fetched(issuer, source))

    def refresh_expired(self) -> None:
        """Start a background refresh of every URL issuer whose cached set has expired."""
        for issuer in self._sources:
            if self.may_refresh(issuer, unknown_kid=False):
                self._in_background(self.refresh(issuer))

    def retry_after(self, issuer: str) -> float | None:
        """After a token naming a kid ``issuer``'s keys lack was refused: seconds after
        which it is worth sending again, since a fetch of the set that starts after now is
        due by then (one is scheduled at the end of the current interval unless one is
        already); None for an issuer whose keys never change."""
        source = self._sources.get(issuer)
        if source is None or source.url is None:
            return None
        refused_at = self._clock()
        if source.due is None or source.due.done():
            source.due = self._in_background(self._fetch_after(issuer, source, refused_at))
        due = source.last_attempt + self._min_interval
        return max(0.0, due - refused_at) + RETRY_MARGIN_SECONDS

    async def _fetch_after(self, issuer: str, source: IssuerSource, refused_at: float) -> None:
        """Refresh ``issuer`` as soon as allowed, unless a fetch starts after ``refused_at``
        meanwhile (whoever asked for it: any fetch from then on holds what was published)."""
        while source.last_attempt < refused_at:
            wait = source.last_attempt + self._min_interval - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
            else:
                await self.refresh(issuer, unknown_kid=True)

    def _in_background(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _fetched(self, issuer: str, source: IssuerSource) -> Fetched | None:
        assert source.url is not None
        try:
            return await self._fetch(source.url, source.etag)
        except (httpx.HTTPError, ValueError, OSError) as exc:
            logger.warning(
                "JWK Set of %s not refreshed (%s); keeping the last good set", issuer, exc
            )
            return None

    def _apply(self, issuer: str, source: IssuerSource, fetched: Fetched | None) -> bool:
        if fetched is None:
            return False
        if fetched.status == 304:
            source.fresh_until = self._clock() + fresh_for(fetched.headers, self._min_interval)
            return False
        if fetched.status != 200:
            logger.warning(
                "JWK Set of %s answered HTTP %d; keeping the last good set", issuer, fetched.status
            )
            return False
        try:
            keys = TrustedKeys.from_json(fetched.body)
        except (KeyMaterialError, StrictJSONError) as exc:
            reason = getattr(exc, "reason", "jwks_invalid")
            logger.warning(
                "JWK Set of %s refused (%s: %s); keeping the last good set", issuer, reason, exc
            )
            return False
        now = self._clock()
        changed = {key.kid for key in keys} != {key.kid for key in source.keys}
        source.keys, source.fetched_at = keys, now
        source.fresh_until = now + fresh_for(fetched.headers, self._min_interval)
        source.etag = next((v for k, v in fetched.headers.items() if k.lower() == "etag"), None)
        if changed:
            self.version += 1
            logger.info("JWK Set of %s refreshed: kids %s", issuer, sorted(k.kid for k in keys))
        return changed

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
