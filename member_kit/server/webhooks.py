"""Where push notifications may go, how each is signed, and how it is delivered.

* :class:`WebhookPolicy` decides whether a URL may receive notifications: http(s) only, no
  user or password in the URL, and every address the host resolves to inside what the
  operator allowed, judged by :class:`~member_kit.trust.addresses.AddressPolicy` (the
  one address policy: every IPv4 spelling, trailing dots, IPv6 forms that carry an IPv4
  address). Public (globally routable) addresses are allowed unless switched off;
  loopback, private, link-local and other special ranges only when their network is
  listed explicitly (tests list ``127.0.0.0/8``). A URL is checked when a config is
  created (:meth:`WebhookPolicy.check_syntax` for what needs no resolver: literal
  addresses in any spelling, ``localhost`` names; :meth:`WebhookPolicy.target` also
  resolves a name, for configs created with CreateTaskPushNotificationConfig) and again
  right before every delivery, after resolving the host once; the connection then goes
  to the address that was checked, so a name cannot be re-pointed between the check and
  the request.
* :func:`sign_notification` adds a short-lived compact JWS (``typ`` ``a2a-push+jwt``)
  signed with the service's own key: ``iss`` that key's identity (its RFC 9278 thumbprint
  URI), ``aud`` the webhook URL,
  ``iat``, ``exp``, ``jti`` (one per event, the same on every retry, so a receiver can
  drop duplicates), ``taskId`` and ``bodySha256`` (base64url SHA-256 of the exact body).
  A receiver verifies it against the agent's JWK Set; it travels in the
  ``A2A-Push-Signature`` header, next to the configured ``Authorization``.
* :class:`PushDelivery` posts each event (a ``StreamResponse``, ``application/a2a+json``)
  at least once: per webhook in order, with bounded retries and exponential backoff, in
  the background. A receiver that is down delays only its own queue, and is given up on
  after the last retry.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from agent_cards import tls
from agent_cards.keys import SigningKey, b64url_encode
from agent_cards.signatures.primitive import signed_compact
from contracts import strict_json
from contracts.wire import StreamResponse, TaskPushNotificationConfig, to_wire
from member_kit import errors
from member_kit.telemetry import tracing
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.addresses import (
    AddressPolicy,
    IPAddress,
    IPNetwork,
    host_address,
    is_localhost_name,
)

logger = logging.getLogger(__name__)

PUSH_MEDIA_TYPE = "application/a2a+json"
SIGNATURE_HEADER = "A2A-Push-Signature"
TOKEN_HEADER = "X-A2A-Notification-Token"
PUSH_TOKEN_TYPE = "a2a-push+jwt"
DEFAULT_TOKEN_LIFETIME_SECONDS = 120

Resolver = Callable[[str, int], Awaitable[list[str]]]


class WebhookRefused(errors.InvalidParams):
    """A webhook URL this service will not send to."""


# --- where notifications may go ------------------------------------------------------------


async def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True)
class Target:
    """A checked webhook: the URL as configured and the address it is sent to."""

    url: str
    host: str
    address: str


@dataclass(frozen=True)
class WebhookPolicy:
    """Which webhook addresses are allowed (see the module docstring)."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    allow_public: bool = True
    resolver: Resolver = field(default=resolve, repr=False, compare=False)

    @classmethod
    def from_strings(cls, networks: Iterable[str], *, allow_public: bool = True) -> WebhookPolicy:
        return cls(tuple(ipaddress.ip_network(n, strict=False) for n in networks), allow_public)

    def allows(self, address: IPAddress) -> bool:
        return AddressPolicy(self.allowed_networks, self.allow_public).allows(address)

    def check_syntax(self, url: str) -> None:
        """Refuse what no resolution can make acceptable; a named host is checked later."""
        parts = _parts(url)
        host = parts.hostname or ""
        literal = host_address(host)
        if literal is not None and not self.allows(literal):
            raise WebhookRefused(f"webhook address {literal} is not allowed by this agent")
        if is_localhost_name(host) and not self.allows(ipaddress.ip_address("127.0.0.1")):
            raise WebhookRefused(f"webhook host {host} is not allowed by this agent")

    async def target(self, url: str) -> Target:
        """Resolve the URL's host once and check every address; the first is used."""
        self.check_syntax(url)
        parts = _parts(url)
        host = parts.hostname or ""
        literal = host_address(host)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = [str(literal)] if literal else await self.resolver(host, port)
        except OSError as exc:
            raise WebhookRefused(f"webhook host {host} does not resolve: {exc}") from None
        if not addresses:
            raise WebhookRefused(f"webhook host {host} does not resolve")
        for address in addresses:
            if not self.allows(_resolved(address)):
                raise WebhookRefused(f"webhook host {host} resolves to {address}, not allowed")
        return Target(url=url, host=host, address=addresses[0])


def _parts(url: str) -> Any:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused("a webhook URL must be an absolute http or https URL")
    if parts.username is not None or parts.password is not None:
        raise WebhookRefused("a webhook URL must not carry credentials; use authentication")
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        raise WebhookRefused("the webhook URL has an invalid port") from None
    return parts


def _resolved(address: str) -> IPAddress:
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        raise WebhookRefused(f"the resolver answered {address!r}, not an address") from None


def pinned_url(target: Target) -> str:
    """The URL with its host replaced by the checked address (Host and SNI keep the name)."""
    parts = urlsplit(target.url)
    address = f"[{target.address}]" if ":" in target.address else target.address
    netloc = address if parts.port is None else f"{address}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


# --- signing ---------------------------------------------------------------------------------


def body_digest(body: bytes) -> str:
    return b64url_encode(hashlib.sha256(body).digest())


def sign_notification(
    body: bytes,
    *,
    key: SigningKey,
    issuer: str,
    audience: str,
    task_id: str,
    jti: str,
    now: int | None = None,
    lifetime: int = DEFAULT_TOKEN_LIFETIME_SECONDS,
) -> str:
    """The compact JWS that vouches for one notification ``body`` sent to ``audience``."""
    issued = int(time.time()) if now is None else now
    claims = {
        "iss": issuer,
        "aud": audience,
        "iat": issued,
        "exp": issued + lifetime,
        "jti": jti,
        "taskId": task_id,
        "bodySha256": body_digest(body),
    }
    header = {"alg": key.alg, "kid": key.kid, "typ": PUSH_TOKEN_TYPE}
    return signed_compact(f"{_segment(header)}.{_segment(claims)}", key)


def _segment(value: Mapping[str, Any]) -> str:
    return b64url_encode(strict_json.dumps(dict(value)))


# --- delivery --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    first_backoff: float = 0.2
    max_backoff: float = 5.0
    timeout: float = 5.0

    def backoff(self, attempt: int) -> float:
        return float(min(self.first_backoff * 2 ** (attempt - 1), self.max_backoff))


@dataclass(frozen=True)
class Notification:
    config: TaskPushNotificationConfig
    task_id: str
    event: StreamResponse
    jti: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class DeliveryRecord:
    """What became of one notification (kept, bounded, for operators and tests)."""

    url: str
    task_id: str
    jti: str
    delivered: bool
    attempts: int
    last_error: str | None = None


class PushDelivery:
    """Background, per-webhook ordered delivery with bounded retries, each delivery in a
    span and counted in ``telemetry`` (the app's)."""

    def __init__(
        self,
        *,
        key: Callable[[], SigningKey],
        issuer: str,
        policy: WebhookPolicy,
        retry: RetryPolicy | None = None,
        queue_limit: int = 256,
        history_limit: int = 1000,
        http: httpx.AsyncClient | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._telemetry = telemetry or Telemetry.standalone()
        self._deliver = self._telemetry.push_delivery(self._deliver_now)
        self._key = key
        self._issuer = issuer
        self.policy = policy
        self._retry = retry or RetryPolicy()
        self._queue_limit = queue_limit
        self._history_limit = history_limit
        self._http = http or httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            verify=tls.verified(),
            timeout=self._retry.timeout,
        )
        self._queues: dict[str, asyncio.Queue[Notification]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self.history: list[DeliveryRecord] = []

    def enqueue(self, notification: Notification) -> None:
        """Queue a notification for its webhook; never waits. A full queue drops it."""
        url = notification.config.url
        queue = self._queues.get(url)
        if queue is None:
            queue = self._queues[url] = asyncio.Queue(self._queue_limit)
        try:
            queue.put_nowait(notification)
        except asyncio.QueueFull:
            logger.warning("push queue for %s is full; notification dropped", url)
            self._remember(
                DeliveryRecord(url, notification.task_id, notification.jti, False, 0, "queue full")
            )
            return
        if url not in self._workers:
            self._workers[url] = asyncio.create_task(self._drain(url, queue))

    async def idle(self) -> None:
        """Wait until every queued notification was delivered or given up on."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def aclose(self) -> None:
        for worker in self._workers.values():
            worker.cancel()
        await asyncio.gather(*self._workers.values(), return_exceptions=True)
        await self._http.aclose()

    async def _drain(self, url: str, queue: asyncio.Queue[Notification]) -> None:
        try:
            while not queue.empty():
                await self._deliver(queue.get_nowait())
        finally:
            del self._workers[url]
            if queue.empty():
                self._queues.pop(url, None)

    async def _deliver_now(self, notification: Notification) -> None:
        body = strict_json.dumps(to_wire(notification.event))
        record = DeliveryRecord(
            notification.config.url, notification.task_id, notification.jti, False, 0
        )
        for attempt in range(1, self._retry.attempts + 1):
            record.attempts = attempt
            try:
                status = await self._post(notification, body)
            except (httpx.HTTPError, WebhookRefused) as exc:
                record.last_error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, WebhookRefused):
                    break
            else:
                if 200 <= status < 300:
                    record.delivered = True
                    break
                record.last_error = f"HTTP {status}"
                if 400 <= status < 500 and status not in (408, 429):
                    break
            if attempt < self._retry.attempts:
                await asyncio.sleep(self._retry.backoff(attempt))
        if not record.delivered:
            logger.warning(
                "push to %s for task %s given up after %d attempts: %s",
                record.url,
                record.task_id,
                record.attempts,
                record.last_error,
            )
        self._telemetry.push_outcome(record.delivered, record.attempts)
        self._remember(record)

    async def _post(self, notification: Notification, body: bytes) -> int:
        config = notification.config
        target = await self.policy.target(config.url)
        headers = {
            "Content-Type": PUSH_MEDIA_TYPE,
            "Host": urlsplit(config.url).netloc,
            SIGNATURE_HEADER: sign_notification(
                body,
                key=self._key(),
                issuer=self._issuer,
                audience=config.url,
                task_id=notification.task_id,
                jti=notification.jti,
            ),
        }
        if config.authentication is not None:
            credentials = config.authentication.credentials or ""
            headers["Authorization"] = f"{config.authentication.scheme} {credentials}".strip()
        if config.token:
            headers[TOKEN_HEADER] = config.token
        tracing.inject(headers)
        request = self._http.build_request(
            "POST",
            pinned_url(target),
            content=body,
            headers=headers,
            extensions={"sni_hostname": target.host},
        )
        response = await self._http.send(request)
        await response.aclose()
        return response.status_code

    def _remember(self, record: DeliveryRecord) -> None:
        self.history.append(record)
        del self.history[: -self._history_limit]
