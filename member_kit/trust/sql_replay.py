"""The replay guard in the database: a token's ``(issuer, jti)`` claimed once, across restarts.

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
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.exc import SQLAlchemyError

from agent_cards.clock import utc_now
from member_kit.storage.engine import driver_errors, driver_sql, driver_write
from member_kit.storage.schema import holder_proofs, used_tokens
from member_kit.trust.replay import Clock, ReplayGuardUnavailable

# Expired rows are purged on the first claim and then at most once per this interval.
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
            raise ReplayGuardUnavailable(f"cannot record the proof: {type(exc).__name__}") from exc
