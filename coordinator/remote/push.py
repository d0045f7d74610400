"""Receiving push notifications for a run: a small ASGI app and one inbox per remote task.

An agent POSTs each update of a task (a ``StreamResponse``) to the webhook URL it was
given, ``{base_url}/a2a/push/{agent name}``. The receiver accepts it only if

1. the ``A2A-Push-Signature`` header holds a compact JWS (``typ`` ``a2a-push+jwt``,
   ``alg`` EdDSA or ES256) that verifies with a key pinned when the agent's card was
   registered (never a key the request points to);
2. its claims say: ``iss`` the identity the verifying key proves (the RFC 9278
   thumbprint URI of that pinned key, :mod:`agent_cards.identity`), ``aud`` exactly
   this webhook URL, ``iat``/``exp`` current (with leeway) and at most ``max_lifetime``
   apart, ``bodySha256`` the SHA-256 of the exact body, ``taskId`` the task the body is
   about, and that task is one this run is waiting for from that agent;
3. its ``jti`` was not seen before. A repeated ``jti`` (a retry of a delivered update, or
   a replay) is answered 200 so that the sender stops, and dropped.

What is accepted goes to the task's :class:`PushInbox`, whose :meth:`PushInbox.events`
is an event source for :class:`~coordinator.remote.streaming.RemoteUpdates`: a pushed update is
observed exactly like a polled one, and a settled state is confirmed with ``GetTask``
before any artifact is admitted. Refusals: 400 malformed, 401 signature or claims, 404
not a task we wait for, 413 too large.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_cards.identity import identity_of
from agent_cards.keys import ALGORITHMS, KID_PATTERN, TrustedKeys, b64url_decode, b64url_encode
from agent_cards.signatures.pyjwt_framing import decode_complete
from agent_cards.trusted import VerificationKey
from contracts import strict_json
from contracts.wire import StreamResponse
from coordinator.errors import PushRefused
from coordinator.remote.cards.registered_agent import RegisteredAgent

logger = logging.getLogger(__name__)

PUSH_PATH = "/a2a/push"
SIGNATURE_HEADER = "A2A-Push-Signature"
PUSH_TOKEN_TYPE = "a2a-push+jwt"
_CLAIMS = ("iss", "aud", "iat", "exp", "jti", "taskId", "bodySha256")


class PushInbox:
    """Accepted updates of one remote task, handed to the loop that waits for them."""

    def __init__(self, limit: int = 256) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[StreamResponse] = asyncio.Queue(limit)

    def put(self, event: StreamResponse) -> None:
        """Thread-safe: the receiver may run on another event loop."""
        self._loop.call_soon_threadsafe(self._offer, event)

    def _offer(self, event: StreamResponse) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            logger.warning("push inbox full; update dropped (GetTask will catch up)")

    def pending(self) -> int:
        """How many accepted updates wait to be read."""
        return self._queue.qsize()

    async def events(self) -> AsyncIterator[StreamResponse]:
        while True:
            yield await self._queue.get()


@dataclass(frozen=True)
class _Sender:
    agent: RegisteredAgent
    keys: TrustedKeys


class PushReceiver:
    """The webhook endpoint of one run; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        *,
        clock: Callable[[], float] = time.time,
        leeway: int = 30,
        max_lifetime: int = 300,
        max_body_bytes: int = 1_000_000,
        max_seen: int = 100_000,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._clock = clock
        self._leeway = leeway
        self._max_lifetime = max_lifetime
        self._max_body = max_body_bytes
        self._max_seen = max_seen
        self._senders: dict[str, _Sender] = {}
        self._inboxes: dict[tuple[str, str], PushInbox] = {}
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route(PUSH_PATH + "/{agent}", self._handle, methods=["POST"])])

    def webhook_url(self, agent_name: str) -> str:
        return f"{self.base_url}{PUSH_PATH}/{agent_name}"

    def expect(self, agent: RegisteredAgent, task_id: str) -> PushInbox:
        """Wait for pushes about ``task_id`` from ``agent``; call it on the waiting loop."""
        keys = TrustedKeys.from_json(agent.pinned_jwks)
        inbox = PushInbox()
        with self._lock:
            self._senders[agent.name] = _Sender(agent, keys)
            self._inboxes[(agent.name, task_id)] = inbox
        return inbox

    def forget(self, agent_name: str, task_id: str) -> None:
        with self._lock:
            self._inboxes.pop((agent_name, task_id), None)

    async def _handle(self, request: Request) -> JSONResponse:
        name = request.path_params["agent"]
        try:
            body = await _read(request, self._max_body)
            event, task_id, fresh = self._accept(name, request.headers.get(SIGNATURE_HEADER), body)
        except PushRefused as refused:
            logger.warning("push to %s refused: %s", name, refused.reason)
            return JSONResponse({"refused": refused.reason}, status_code=refused.status)
        if fresh:
            with self._lock:
                inbox = self._inboxes.get((name, task_id))
            if inbox is not None:
                inbox.put(event)
        return JSONResponse({"accepted": fresh, "duplicate": not fresh})

    def _accept(
        self, name: str, token: str | None, body: bytes
    ) -> tuple[StreamResponse, str, bool]:
        with self._lock:
            sender = self._senders.get(name)
        if sender is None:
            raise PushRefused(404, "unknown_sender")
        if not token:
            raise PushRefused(401, "signature_missing")
        claims, key = self._verified_claims(token, sender.keys)
        self._check_claims(claims, identity_of(key), self.webhook_url(name), body)
        try:
            event = StreamResponse.model_validate(strict_json.loads(body))
        except strict_json.JSONOutOfBounds as exc:
            raise PushRefused(400, exc.reason) from None
        except ValueError:
            raise PushRefused(400, "body_not_a_stream_response") from None
        task_id = claims["taskId"]
        if event.task_id != task_id:
            raise PushRefused(401, "task_mismatch")
        with self._lock:
            if (name, task_id) not in self._inboxes:
                raise PushRefused(404, "unknown_task")
            fresh = self._remember(claims["jti"], claims["exp"])
        return event, task_id, fresh

    def _verified_claims(
        self, token: str, keys: TrustedKeys
    ) -> tuple[dict[str, Any], VerificationKey]:
        try:
            header = strict_json.loads(b64url_decode(token.split(".", 1)[0]))
        except strict_json.JSONOutOfBounds as exc:
            raise PushRefused(400, exc.reason) from None
        except ValueError:
            raise PushRefused(400, "signature_malformed") from None
        if not isinstance(header, dict) or header.get("typ") != PUSH_TOKEN_TYPE:
            raise PushRefused(401, "signature_type")
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS or not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid):
            raise PushRefused(401, "signature_header")
        key = keys.get(kid)
        if key is None or key.alg != alg:
            raise PushRefused(401, "signature_key_unknown")
        try:
            decoded = decode_complete(token, key)
            claims = strict_json.loads(decoded["payload"])
        except (jwt.PyJWTError, ValueError):
            raise PushRefused(401, "signature_invalid") from None
        if not isinstance(claims, dict) or any(name not in claims for name in _CLAIMS):
            raise PushRefused(401, "claims_missing")
        return claims, key

    def _check_claims(
        self, claims: dict[str, Any], issuer: str, audience: str, body: bytes
    ) -> None:
        now = int(self._clock())
        iat, exp = claims["iat"], claims["exp"]
        if not isinstance(iat, int) or not isinstance(exp, int):
            raise PushRefused(401, "claims_malformed")
        if not all(isinstance(claims[name], str) for name in ("jti", "taskId", "bodySha256")):
            raise PushRefused(401, "claims_malformed")
        if claims["iss"] != issuer:
            raise PushRefused(401, "issuer_mismatch")
        if claims["aud"] != audience:
            raise PushRefused(401, "audience_mismatch")
        if exp + self._leeway < now or iat - self._leeway > now or exp - iat > self._max_lifetime:
            raise PushRefused(401, "signature_expired")
        if claims["bodySha256"] != b64url_encode(hashlib.sha256(body).digest()):
            raise PushRefused(401, "body_hash_mismatch")

    def _remember(self, jti: str, exp: int) -> bool:
        """Record ``jti`` until it expires; False if it was already recorded."""
        now = int(self._clock())
        while self._seen and next(iter(self._seen.values())) + self._leeway < now:
            self._seen.popitem(last=False)
        if jti in self._seen:
            return False
        if len(self._seen) >= self._max_seen:
            raise PushRefused(503, "replay_cache_full")
        self._seen[jti] = exp
        return True


async def _read(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PushRefused(413, "body_too_large")
        chunks.append(chunk)
    return b"".join(chunks)
