"""Revocation as a member sees it: which grants its issuers took back, learnt two ways.

1. A **push**: the issuer POSTs a compact JWS (``typ`` ``revocation+jwt``) to the member's
   revocation endpoint. It is signed by a pinned key of a trusted issuer, names this
   member (``aud``, one of its identities), carries ``iat`` (not older than
   :data:`MAX_PUSH_AGE`, not in the future beyond the leeway), ``exp`` and a ``jti`` taken
   once (a replayed push is refused), and lists the revoked handoffs
   (``handoffs``, every grant bound to one of them is revoked).
2. A **status list** (IETF OAuth Token Status List): a token may carry
   ``status: {status_list: {idx, uri}}``; the member polls each such ``uri`` for a
   compact JWS (``typ`` ``statuslist+jwt``, ``sub`` equal to the uri) signed by the
   token's issuer, whose ``status_list`` holds ``bits`` (1) and ``lst``, the base64url
   ZLIB-compressed bit array (index 0 the least significant bit of byte 0). A set bit at
   the token's ``idx`` revokes its handoff.

:meth:`Revocations.admit` is called by the one delegation verifier on every request:
a grant of a revoked handoff is refused (``token_revoked``), any other one is watched
(remembered until it expires, so its status list is polled and its tasks can be found).
A refused push raises :class:`RevocationRefused` with a stable reason.

Given a :class:`RevocationStore` (the member's database,
:class:`~member_kit.trust.sql_replay.SQLRevocationStore`), every change is written
through before it is applied in memory, and what the store holds is loaded on start: a
member restarted mid-incident still refuses what it was told to, still refuses a
replayed push, and still watches the grants it accepted.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from agent_cards.clock import utc_now
from agent_cards.keys import TrustedKeys
from contracts.grant import Grant
from contracts.status_list import decode_status_list, status_at
from member_kit.tasks.record import task_owner
from member_kit.trust import token_format
from member_kit.trust.denials import DenialReason as R
from member_kit.trust.denials import deny
from member_kit.trust.replay import ReplayGuardUnavailable

PUSH_TYPE = "revocation+jwt"
STATUS_LIST_TYPE = "statuslist+jwt"
MAX_PUSH_AGE = timedelta(minutes=5)
MAX_DOCUMENT_BYTES = 65_536
MAX_HANDOFFS = 1000
# A revocation is remembered this long past the latest exp of a token it could refuse.
REMEMBER_AFTER_EXP = timedelta(minutes=2)

Audiences = Callable[[datetime], Set[str]]
Key = tuple[str, str]  # (issuer, handoff id)


class RevocationReason(StrEnum):
    MALFORMED = "revocation_malformed"
    SIGNATURE_INVALID = "revocation_signature_invalid"
    AUDIENCE_MISMATCH = "revocation_audience_mismatch"
    STALE = "revocation_stale"
    REPLAYED = "revocation_replayed"
    UNAVAILABLE = "revocation_store_unavailable"


# One table from reason to HTTP status; docs/delegation-token.md mirrors it.
REVOCATION_REASONS: Mapping[RevocationReason, tuple[int, str]] = {
    RevocationReason.MALFORMED: (400, "not a compact JWS of the push's shape"),
    RevocationReason.SIGNATURE_INVALID: (
        401,
        "typ, alg, iss or kid is not a trusted issuer's pinned key, or the signature fails",
    ),
    RevocationReason.AUDIENCE_MISMATCH: (401, "aud is not one of this member's identities"),
    RevocationReason.STALE: (401, "iat older than the push age limit or in the future, or exp"),
    RevocationReason.REPLAYED: (409, "this push's jti was already taken"),
    RevocationReason.UNAVAILABLE: (503, "the member's database cannot record it; sent again"),
}


class RevocationRefused(Exception):
    """A push or status list refused: a stable ``reason``, its HTTP status, a detail."""

    def __init__(self, reason: RevocationReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason
        self.http_status = REVOCATION_REASONS[reason][0]
        self.detail = detail


class RevocationStoreUnavailable(ReplayGuardUnavailable):
    """The revocation state cannot be read or written; the request must fail closed."""


@dataclass
class Remembered:
    """What a store holds: revoked handoffs and push jtis (each to its time), and the
    watched grants with the time each is forgotten."""

    revoked: dict[Key, int] = field(default_factory=dict)
    pushes: dict[Key, int] = field(default_factory=dict)
    watched: list[tuple[Grant, int]] = field(default_factory=list)


@dataclass(frozen=True)
class PushTaken:
    issuer: str
    jti: str
    expires_at: int


class RevocationStore(Protocol):
    """Where the revocation state outlives the process
    (:class:`~member_kit.trust.sql_replay.SQLRevocationStore`); a failure to read or write
    raises :class:`RevocationStoreUnavailable`."""

    def load(self, now: int) -> Remembered: ...

    def watch(self, grant: Grant, forget_at: int, now: int) -> None: ...

    def revoke(
        self,
        revoked: Mapping[Key, int],
        unwatched: Collection[tuple[str, str]],
        now: int,
        push: PushTaken | None = None,
    ) -> bool: ...


@dataclass(frozen=True)
class StatusRef:
    uri: str
    idx: int


@dataclass(frozen=True, slots=True)
class Watched:
    """What a member keeps of a grant it accepted, until the grant expires: enough to
    find it by its handoff or its status list entry and to cancel the tasks opened under
    it (their ``owner``). Not the grant itself: every token accepted is watched for its
    lifetime, and a whole grant is kilobytes (6.2 KB kept a token before)."""

    jti: str
    iss: str
    handoff_id: str
    exp: int
    owner: str
    status: StatusRef | None

    @classmethod
    def of(cls, grant: Grant) -> Watched:
        iss = sys.intern(grant.iss)  # an issuer's name: one string for all its tokens
        owner = task_owner(iss, grant.sub, grant.tenant, grant.handoff.id)
        return cls(grant.jti, iss, grant.handoff.id, grant.exp, owner, status_ref(grant))


class Revocations:
    """The revoked handoffs of this member's trusted issuers, and the grants it watches."""

    def __init__(
        self,
        issuers: Mapping[str, TrustedKeys],
        audiences: Audiences,
        *,
        clock: Callable[[], datetime] = utc_now,
        leeway: timedelta = timedelta(seconds=30),
        store: RevocationStore | None = None,
    ) -> None:
        self._issuers = issuers
        self._audiences = audiences
        self._clock = clock
        self._leeway = int(leeway.total_seconds())
        self._revoked: dict[Key, int] = {}  # -> until (epoch seconds)
        self._watched: dict[str, Watched] = {}  # by jti
        self._by_handoff: dict[Key, set[str]] = {}  # jtis
        self._by_list: dict[str, set[str]] = {}  # status list uri -> jtis
        self._expiries: list[tuple[int, str]] = []  # (forget at, jti), a heap
        self._swept_at = 0
        self._push_jtis: dict[tuple[str, str], int] = {}  # (iss, jti) -> exp
        self._store = store
        if store is not None:
            self._remember(store.load(self._now()))

    # --- the verifier's hook ----------------------------------------------------------------

    def admit(self, grant: Grant) -> None:
        """Refuse a grant of a revoked handoff (``token_revoked``), else watch it."""
        now = self._now()
        self._forget(now)
        if (grant.iss, grant.handoff.id) in self._revoked:
            raise deny(R.TOKEN_REVOKED, "its grant was revoked by the issuer")
        if grant.jti not in self._watched:
            self._watch(Watched.of(grant), grant.exp + self._leeway)

    def keep(self, grant: Grant) -> None:
        """Record ``grant`` watched in the store, for a restarted process to cancel its
        task: called with the token's claim for the task it creates, so it is written in
        that task's transaction (no write of its own). Raises
        :class:`RevocationStoreUnavailable` (the claim, and the task, fail closed)."""
        if self._store is not None:
            self._store.watch(grant, grant.exp + self._leeway, self._now())

    def is_revoked(self, grant: Grant) -> bool:
        return (grant.iss, grant.handoff.id) in self._revoked

    # --- the push -------------------------------------------------------------------------

    def accept_push(self, token: object) -> list[Watched]:
        """Apply a pushed revocation; the watched grants it revokes (their tasks are to be
        cancelled). Raises :class:`RevocationRefused`."""
        now = self._now()
        issuer, claims = self._verified(token, PUSH_TYPE)
        handoffs = _push_claims(claims)
        aud = claims["aud"]
        if not isinstance(aud, str) or aud not in self._audiences(self._clock()):
            raise RevocationRefused(RevocationReason.AUDIENCE_MISMATCH)
        if claims["iat"] > now + self._leeway or claims["exp"] <= now - self._leeway:
            raise RevocationRefused(RevocationReason.STALE, "issued in the future, or expired")
        if claims["iat"] < now - int(MAX_PUSH_AGE.total_seconds()):
            raise RevocationRefused(RevocationReason.STALE, "older than the push age limit")
        self._forget(now)
        if (issuer, claims["jti"]) in self._push_jtis:
            raise RevocationRefused(RevocationReason.REPLAYED)
        push = PushTaken(issuer, claims["jti"], claims["exp"] + self._leeway)
        return self._revoke(issuer, handoffs, push)

    def revoke(self, issuer: str, handoffs: Iterable[str]) -> list[Watched]:
        """Record ``handoffs`` of ``issuer`` revoked; the watched grants newly revoked.
        Raises :class:`RevocationRefused` (unavailable) when the store cannot record it."""
        return self._revoke(issuer, handoffs, None)

    def _revoke(
        self, issuer: str, handoffs: Iterable[str], push: PushTaken | None
    ) -> list[Watched]:
        now = self._now()
        until = now + int((MAX_PUSH_AGE + REMEMBER_AFTER_EXP).total_seconds())
        keys = {(issuer, handoff) for handoff in handoffs}
        revoked = {key: max(self._revoked.get(key, 0), until) for key in keys}
        hit = [self._watched[jti] for key in keys for jti in self._by_handoff.get(key, ())]
        for watched in hit:
            key = (watched.iss, watched.handoff_id)
            revoked[key] = max(revoked[key], watched.exp + self._leeway)
        self._record(revoked, [(watched.iss, watched.jti) for watched in hit], now, push)
        self._revoked.update(revoked)
        for watched in hit:
            self._drop(watched.jti)
        return hit

    def _record(
        self,
        revoked: Mapping[Key, int],
        unwatched: list[tuple[str, str]],
        now: int,
        push: PushTaken | None,
    ) -> None:
        """Write a revocation through to the store (when there is one), then take its push."""
        if self._store is not None:
            try:
                taken = self._store.revoke(revoked, unwatched, now, push)
            except RevocationStoreUnavailable:
                raise RevocationRefused(RevocationReason.UNAVAILABLE) from None
            if not taken:  # another process of this member took it (the database decides)
                raise RevocationRefused(RevocationReason.REPLAYED)
        if push is not None:
            self._push_jtis[(push.issuer, push.jti)] = push.expires_at

    # --- the status list ------------------------------------------------------------------

    def status_lists(self) -> dict[str, str]:
        """Each status list uri the watched grants name, with the issuer that signs it."""
        self._forget(self._now())
        return {uri: self._watched[next(iter(jtis))].iss for uri, jtis in self._by_list.items()}

    def apply_status_list(self, uri: str, token: object) -> list[Watched]:
        """Apply a fetched status list; the watched grants it revokes. Raises
        :class:`RevocationRefused` for a list that is not the issuer's for ``uri``."""
        now = self._now()
        issuer, claims = self._verified(token, STATUS_LIST_TYPE)
        if claims.get("sub") != uri:
            raise RevocationRefused(RevocationReason.MALFORMED, "sub is not the list's uri")
        iat, exp = claims.get("iat"), claims.get("exp", now + self._leeway + 1)
        if not isinstance(iat, int) or not isinstance(exp, int) or iat > now + self._leeway:
            raise RevocationRefused(RevocationReason.STALE, "iat missing or in the future")
        if exp <= now - self._leeway:
            raise RevocationRefused(RevocationReason.STALE, "the list has expired")
        try:
            bits = decode_status_list(claims.get("status_list"))
        except ValueError as exc:
            raise RevocationRefused(RevocationReason.MALFORMED, str(exc)) from None
        watched = [self._watched[jti] for jti in self._by_list.get(uri, ())]
        revoked = [
            w.handoff_id
            for w in watched
            if w.status is not None and w.iss == issuer and status_at(bits, w.status.idx)
        ]
        return self.revoke(issuer, revoked) if revoked else []

    # --- shared -----------------------------------------------------------------------------

    def _verified(self, token: object, typ: str) -> tuple[str, dict[str, Any]]:
        """The issuer and claims of a compact JWS of type ``typ`` signed by a trusted
        issuer's pinned key (the same format rules as a delegation token's)."""
        if not isinstance(token, str) or len(token) > MAX_DOCUMENT_BYTES:
            raise RevocationRefused(RevocationReason.MALFORMED, "not a compact JWS")
        if not token_format.TOKEN_SHAPE.fullmatch(token):
            raise RevocationRefused(RevocationReason.MALFORMED, "not three base64url segments")
        head, body, signature = token.split(".")
        try:
            alg, kid = token_format.checked_header(token_format.json_object(head), typ)
            claims = token_format.json_object(body)
        except Exception as exc:
            raise RevocationRefused(RevocationReason.MALFORMED, _reason_of(exc)) from None
        issuer = claims.get("iss")
        keys = self._issuers.get(issuer) if isinstance(issuer, str) else None
        key = keys.get(kid, at=self._clock()) if keys is not None else None
        if issuer is None or key is None or key.alg != alg:
            raise RevocationRefused(RevocationReason.SIGNATURE_INVALID, "no such pinned key")
        try:
            token_format.check_signature(f"{head}.{body}", signature, key)
        except Exception:
            raise RevocationRefused(RevocationReason.SIGNATURE_INVALID) from None
        assert isinstance(issuer, str)
        return issuer, claims

    def _forget(self, now: int) -> None:
        """Drop what can no longer matter: grants past their time (each in O(log n), as
        they expire), and, once a second at most, revocations and push jtis past theirs."""
        expiries = self._expiries
        while expiries and expiries[0][0] < now:
            _, jti = heapq.heappop(expiries)
            self._drop(jti)
        if now == self._swept_at:
            return
        self._swept_at = now
        for key in [k for k, until in self._revoked.items() if until < now]:
            del self._revoked[key]
        for push in [k for k, exp in self._push_jtis.items() if exp < now]:
            del self._push_jtis[push]

    def _remember(self, remembered: Remembered) -> None:
        """Take on what the store held at start."""
        self._revoked.update(remembered.revoked)
        self._push_jtis.update(remembered.pushes)
        for grant, forget_at in remembered.watched:
            if (grant.iss, grant.handoff.id) not in self._revoked:
                self._watch(Watched.of(grant), forget_at)

    def _watch(self, watched: Watched, forget_at: int) -> None:
        jti = watched.jti
        heapq.heappush(self._expiries, (forget_at, jti))
        self._watched[jti] = watched
        self._by_handoff.setdefault((watched.iss, watched.handoff_id), set()).add(jti)
        if watched.status is not None:
            self._by_list.setdefault(watched.status.uri, set()).add(jti)

    def _drop(self, jti: str) -> None:
        watched = self._watched.pop(jti, None)
        if watched is None:
            return
        _discard(self._by_handoff, (watched.iss, watched.handoff_id), jti)
        if watched.status is not None:
            _discard(self._by_list, watched.status.uri, jti)

    def _now(self) -> int:
        return int(self._clock().timestamp())


def _discard(index: dict[Any, set[str]], key: Any, jti: str) -> None:
    jtis = index.get(key)
    if jtis is not None:
        jtis.discard(jti)
        if not jtis:
            del index[key]


def status_ref(grant: Grant) -> StatusRef | None:
    if grant.status is None:
        return None
    reference = grant.status.status_list
    return StatusRef(reference.uri, reference.idx)


def _push_claims(claims: Mapping[str, Any]) -> list[str]:
    for name in ("aud", "jti"):
        if not isinstance(claims.get(name), str):
            raise RevocationRefused(RevocationReason.MALFORMED, f"{name} must be a string")
    for name in ("iat", "exp"):
        if not _is_int(claims.get(name)):
            raise RevocationRefused(RevocationReason.MALFORMED, f"{name} must be an integer")
    handoffs = claims.get("handoffs")
    if (
        not isinstance(handoffs, list)
        or not 0 < len(handoffs) <= MAX_HANDOFFS
        or not all(isinstance(h, str) and h for h in handoffs)
    ):
        raise RevocationRefused(RevocationReason.MALFORMED, "handoffs must list handoff ids")
    return list(handoffs)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reason_of(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)
    return str(getattr(reason, "value", reason or type(exc).__name__))
