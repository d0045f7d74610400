"""What the trust checks record in the database, so a restart (or another replica) forgets
none of it: used tokens, taken holder proofs, and what the member learnt of revocations.

The replay guard: a token's ``(issuer, jti)`` claimed once, across restarts.

A claim is one ``INSERT ... ON CONFLICT DO NOTHING`` into ``remote_risk_used_tokens``,
whose primary key is ``(issuer, jti)``: the database decides atomically which of two
concurrent claims wins, also between replicas on one PostgreSQL. A claim made while the
task store writes the task the token creates joins that write (see
:func:`~member_kit.storage.engine.driver_write`), so the claim stands only if the task
is stored. The row is kept until the token's ``exp`` plus the verifier's leeway; rows
past that are purged now and then by later claims. When the database cannot be written
the guard raises :class:`~member_kit.trust.replay.ReplayGuardUnavailable`, so the request
fails closed (503).

:class:`SQLProofReplayGuard` does the same for holder proofs (RFC 9449 DPoP): each
``(jkt, jti)`` is one row of ``remote_risk_holder_proofs`` until no proof with it could
be accepted any more, so a proof replayed after a restart, or to another replica, is
refused.

:class:`SQLRevocationStore` keeps the state of
:class:`~member_kit.trust.revocation.Revocations` (which works from memory, writes through
and loads it on start) in two tables of its own: ``remote_risk_revoked_handoffs`` (each revoked
``(issuer, handoff)`` until no token it could refuse is still valid) and
``remote_risk_revocation_pushes`` (each applied push's ``(issuer, jti)`` until the push
expires, so a replay after a restart is still refused). Each grant it watches (accepted,
unexpired, so its status list is still polled and its tasks still cancelled) is kept in
its token's used-token row, its claims as JSON in ``watched_claims``: the token that
creates a task is claimed and watched in that task's transaction, and one row holds both
(rr0011), expired with it. A push is recorded in one transaction with what it revokes, its
jti taken by the insert (the database decides, also between replicas on one PostgreSQL).
A failure raises
:class:`~member_kit.trust.revocation.RevocationStoreUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import SQLAlchemyError

from agent_cards.clock import utc_now
from contracts.grant import Grant
from member_kit.storage.engine import driver_errors, driver_read, driver_sql, driver_write
from member_kit.storage.schema import (
    holder_proofs,
    revocation_pushes,
    revoked_handoffs,
    used_tokens,
)
from member_kit.trust.replay import Clock, ReplayGuardUnavailable
from member_kit.trust.revocation import (
    Key,
    PushTaken,
    Remembered,
    RevocationStoreUnavailable,
)

logger = logging.getLogger(__name__)

# Expired rows are purged on the first write and then at most once per this interval.
PURGE_INTERVAL_SECONDS = 60

_CLAIM = (
    f"INSERT INTO {used_tokens.name} (issuer, jti, expires_at) "
    "VALUES (:issuer, :jti, :expires_at) ON CONFLICT DO NOTHING"
)
_PURGE = f"DELETE FROM {used_tokens.name} WHERE expires_at < :now"
_TAKE_PROOF = (
    f"INSERT INTO {holder_proofs.name} (jkt, jti, expires_at) "
    "VALUES (:jkt, :jti, :expires_at) ON CONFLICT DO NOTHING"
)
_PURGE_PROOFS = f"DELETE FROM {holder_proofs.name} WHERE expires_at < :now"


class SQLReplayGuard:
    """A :class:`~member_kit.trust.replay.ReplayGuard` in the database behind ``engine``."""

    def __init__(
        self, engine: Engine, clock: Clock = utc_now, *, leeway: timedelta = timedelta(seconds=30)
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._leeway = int(leeway.total_seconds())
        self._purged_at: int | None = None
        self._claim_sql = driver_sql(engine, _CLAIM)
        self._purge_sql = driver_sql(engine, _PURGE)
        self._unavailable = (SQLAlchemyError, driver_errors(engine).Error)

    def claim_task_creation(self, jti: str, exp: int, *, issuer: str) -> bool:
        now = int(self._clock().timestamp())
        claim = {"issuer": issuer, "jti": jti, "expires_at": exp + self._leeway}
        try:
            with driver_write(self._engine) as cursor:
                self._purge_expired(cursor, now)
                cursor.execute(self._claim_sql, claim)
                return cursor.rowcount == 1
        except self._unavailable as exc:
            logger.warning("the replay guard could not record a token", exc_info=True)
            raise ReplayGuardUnavailable(f"cannot record the token: {type(exc).__name__}") from exc

    def _purge_expired(self, cursor: DBAPICursor, now: int) -> None:
        if self._purged_at is not None and now - self._purged_at < PURGE_INTERVAL_SECONDS:
            return
        cursor.execute(self._purge_sql, {"now": now})
        self._purged_at = now


class SQLProofReplayGuard:
    """A :class:`~member_kit.trust.holder_proof.ProofReplay` in the database behind
    ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._purged_at: int | None = None
        self._take_sql = driver_sql(engine, _TAKE_PROOF)
        self._purge_sql = driver_sql(engine, _PURGE_PROOFS)
        self._unavailable = (SQLAlchemyError, driver_errors(engine).Error)

    def take(self, jkt: str, jti: str, until: int, now: int) -> bool:
        try:
            with driver_write(self._engine) as cursor:
                if self._purged_at is None or now - self._purged_at >= PURGE_INTERVAL_SECONDS:
                    cursor.execute(self._purge_sql, {"now": now})
                    self._purged_at = now
                cursor.execute(self._take_sql, {"jkt": jkt, "jti": jti, "expires_at": until})
                return cursor.rowcount == 1
        except self._unavailable as exc:
            logger.warning("the replay guard could not record a proof", exc_info=True)
            raise ReplayGuardUnavailable(f"cannot record the proof: {type(exc).__name__}") from exc


_H, _P, _U = revoked_handoffs.name, revocation_pushes.name, used_tokens.name
# The token's row is the replay guard's claim, written just before in the same
# transaction; a grant watched without one (no claim) gets a row of its own. The row
# lives as long as the longer of the two needs it.
_WATCH = (
    f"INSERT INTO {_U} (issuer, jti, expires_at, watched_claims) "
    "VALUES (:issuer, :jti, :forget_at, :claims) "
    "ON CONFLICT (issuer, jti) DO UPDATE SET watched_claims = excluded.watched_claims, "
    f"expires_at = CASE WHEN excluded.expires_at > {_U}.expires_at "
    f"THEN excluded.expires_at ELSE {_U}.expires_at END"
)
_TAKE_PUSH = (
    f"INSERT INTO {_P} (issuer, jti, expires_at) VALUES (:issuer, :jti, :expires_at) "
    "ON CONFLICT DO NOTHING"
)
_REVOKE = (
    f"INSERT INTO {_H} (issuer, handoff_id, keep_until) VALUES (:issuer, :handoff_id, :until) "
    f"ON CONFLICT (issuer, handoff_id) DO UPDATE SET keep_until = CASE "
    f"WHEN excluded.keep_until > {_H}.keep_until THEN excluded.keep_until "
    f"ELSE {_H}.keep_until END"
)
_UNWATCH = f"UPDATE {_U} SET watched_claims = NULL WHERE issuer = :issuer AND jti = :jti"
# The watched grants' rows expire with the used tokens (the replay guard purges them).
_PURGE_REVOCATIONS = (
    f"DELETE FROM {_H} WHERE keep_until < :now",
    f"DELETE FROM {_P} WHERE expires_at < :now",
)
_LOAD_REVOKED = f"SELECT issuer, handoff_id, keep_until FROM {_H} WHERE keep_until >= :now"
_LOAD_PUSHES = f"SELECT issuer, jti, expires_at FROM {_P} WHERE expires_at >= :now"
_LOAD_WATCHED = (
    f"SELECT watched_claims, expires_at FROM {_U} "
    "WHERE watched_claims IS NOT NULL AND expires_at >= :now"
)


class SQLRevocationStore:
    """The revocation state in the database behind ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._purged_at: int | None = None
        self._sql = {sql: driver_sql(engine, sql) for sql in (_WATCH, _TAKE_PUSH, _REVOKE)}
        self._sql |= {sql: driver_sql(engine, sql) for sql in (_UNWATCH, *_PURGE_REVOCATIONS)}
        self._sql |= {
            sql: driver_sql(engine, sql) for sql in (_LOAD_REVOKED, _LOAD_PUSHES, _LOAD_WATCHED)
        }
        self._unavailable = (SQLAlchemyError, driver_errors(engine).Error)

    def load(self, now: int) -> Remembered:
        """Everything still in force at ``now``."""
        try:
            with driver_read(self._engine) as cursor:
                cursor.execute(self._sql[_LOAD_REVOKED], {"now": now})
                revoked = {(row[0], row[1]): int(row[2]) for row in cursor.fetchall()}
                cursor.execute(self._sql[_LOAD_PUSHES], {"now": now})
                pushes = {(row[0], row[1]): int(row[2]) for row in cursor.fetchall()}
                cursor.execute(self._sql[_LOAD_WATCHED], {"now": now})
                rows = cursor.fetchall()
        except self._unavailable as exc:
            raise _unavailable(exc) from exc
        watched = [(Grant.model_validate_json(row[0]), int(row[1])) for row in rows]
        return Remembered(revoked, pushes, watched)

    def watch(self, grant: Grant, forget_at: int, now: int) -> None:
        """Record ``grant`` watched until ``forget_at``."""
        claims = grant.model_dump_json(by_alias=True, exclude_none=True)
        row = {"issuer": grant.iss, "jti": grant.jti, "forget_at": forget_at, "claims": claims}
        try:
            with driver_write(self._engine) as cursor:
                self._purge_expired(cursor, now)
                cursor.execute(self._sql[_WATCH], row)
        except self._unavailable as exc:
            raise _unavailable(exc) from exc

    def revoke(
        self,
        revoked: Mapping[Key, int],
        unwatched: Collection[tuple[str, str]],
        now: int,
        push: PushTaken | None = None,
    ) -> bool:
        """Record ``revoked`` (each key until its time) and ``unwatched`` (issuer and
        jti of each) no longer watched, with ``push`` taken, all at once; ``False`` (and
        nothing recorded) when ``push`` was already taken."""
        try:
            with driver_write(self._engine) as cursor:
                self._purge_expired(cursor, now)
                if push is not None and not self._take(cursor, push):
                    return False
                for (issuer, handoff_id), until in revoked.items():
                    row = {"issuer": issuer, "handoff_id": handoff_id, "until": until}
                    cursor.execute(self._sql[_REVOKE], row)
                for issuer, jti in unwatched:
                    cursor.execute(self._sql[_UNWATCH], {"issuer": issuer, "jti": jti})
                return True
        except self._unavailable as exc:
            raise _unavailable(exc) from exc

    def _take(self, cursor: DBAPICursor, push: PushTaken) -> bool:
        row = {"issuer": push.issuer, "jti": push.jti, "expires_at": push.expires_at}
        cursor.execute(self._sql[_TAKE_PUSH], row)
        return bool(cursor.rowcount == 1)

    def _purge_expired(self, cursor: DBAPICursor, now: int) -> None:
        if self._purged_at is not None and now - self._purged_at < PURGE_INTERVAL_SECONDS:
            return
        for sql in _PURGE_REVOCATIONS:
            cursor.execute(self._sql[sql], {"now": now})
        self._purged_at = now


def _unavailable(exc: BaseException) -> RevocationStoreUnavailable:
    return RevocationStoreUnavailable(f"cannot record the revocation state: {type(exc).__name__}")
