"""What a member learnt of revocations, kept in its database so a restart forgets none of it.

:class:`~member_kit.trust.revocation.Revocations` works from memory and writes through
to a :class:`RevocationStore`; on start it loads what the store holds. Three tables
(:mod:`member_kit.storage.schema`, revision rr0007):

- ``remote_risk_revoked_handoffs``: each revoked ``(issuer, handoff)`` and until when it
  must be remembered (past the ``exp`` of every token it could refuse);
- ``remote_risk_revocation_pushes``: each applied push's ``(issuer, jti)`` until the
  push expires, so a push replayed after a restart is still refused;
- ``remote_risk_watched_grants``: each grant accepted and not yet expired (its claims as
  JSON), so its status list is still polled and its tasks still cancelled.

A push is recorded in one transaction with what it revokes: its jti taken (the insert
decides, also between replicas on one PostgreSQL), the handoffs revoked, the revoked
grants no longer watched. Rows past their time are purged by later writes, at most once
per :data:`PURGE_INTERVAL_SECONDS`. A database that cannot be read or written raises
:class:`RevocationStoreUnavailable`: the request or push fails closed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import SQLAlchemyError

from contracts.grant import Grant
from member_kit.storage.engine import driver_errors, driver_read, driver_sql, driver_write
from member_kit.storage.schema import revocation_pushes, revoked_handoffs, watched_grants
from member_kit.trust.replay import ReplayGuardUnavailable

PURGE_INTERVAL_SECONDS = 60

Key = tuple[str, str]  # (issuer, handoff id), or (issuer, push jti)

_H, _P, _W = revoked_handoffs.name, revocation_pushes.name, watched_grants.name
_WATCH = (
    f"INSERT INTO {_W} (jti, forget_at, claims) VALUES (:jti, :forget_at, :claims) "
    "ON CONFLICT DO NOTHING"
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
_UNWATCH = f"DELETE FROM {_W} WHERE jti = :jti"
_PURGE = (
    f"DELETE FROM {_H} WHERE keep_until < :now",
    f"DELETE FROM {_P} WHERE expires_at < :now",
    f"DELETE FROM {_W} WHERE forget_at < :now",
)
_LOAD_REVOKED = f"SELECT issuer, handoff_id, keep_until FROM {_H} WHERE keep_until >= :now"
_LOAD_PUSHES = f"SELECT issuer, jti, expires_at FROM {_P} WHERE expires_at >= :now"
_LOAD_WATCHED = f"SELECT claims, forget_at FROM {_W} WHERE forget_at >= :now"


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


class SQLRevocationStore:
    """The revocation state in the database behind ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._purged_at: int | None = None
        self._sql = {sql: driver_sql(engine, sql) for sql in (_WATCH, _TAKE_PUSH, _REVOKE)}
        self._sql |= {sql: driver_sql(engine, sql) for sql in (_UNWATCH, *_PURGE)}
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
        row = {"jti": grant.jti, "forget_at": forget_at, "claims": claims}
        try:
            with driver_write(self._engine) as cursor:
                self._purge_expired(cursor, now)
                cursor.execute(self._sql[_WATCH], row)
        except self._unavailable as exc:
            raise _unavailable(exc) from exc

    def revoke(
        self,
        revoked: Mapping[Key, int],
        unwatched: Collection[str],
        now: int,
        push: PushTaken | None = None,
    ) -> bool:
        """Record ``revoked`` (each key until its time) and ``unwatched`` no longer
        watched, with ``push`` taken, all at once; ``False`` (and nothing recorded) when
        ``push`` was already taken."""
        try:
            with driver_write(self._engine) as cursor:
                self._purge_expired(cursor, now)
                if push is not None and not self._take(cursor, push):
                    return False
                for (issuer, handoff_id), until in revoked.items():
                    row = {"issuer": issuer, "handoff_id": handoff_id, "until": until}
                    cursor.execute(self._sql[_REVOKE], row)
                for jti in unwatched:
                    cursor.execute(self._sql[_UNWATCH], {"jti": jti})
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
        for sql in _PURGE:
            cursor.execute(self._sql[sql], {"now": now})
        self._purged_at = now


def _unavailable(exc: BaseException) -> RevocationStoreUnavailable:
    return RevocationStoreUnavailable(f"cannot record the revocation state: {type(exc).__name__}")
