"""The replay guard in the database: a token's ``(issuer, jti)`` claimed once, across restarts.

A claim is one INSERT into ``remote_risk_used_tokens``, whose primary key is
``(issuer, jti)``: the database decides atomically which of two concurrent claims wins,
also between replicas on one PostgreSQL. The row is kept until the token's ``exp`` plus
the verifier's leeway; rows past that are purged now and then by later claims. When the
database cannot be written the guard raises
:class:`~remote_risk.replay.ReplayGuardUnavailable`, so the request fails closed (503).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, delete, insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from remote_risk.replay import Clock, ReplayGuardUnavailable, utc_now
from remote_risk.storage.engine import write_transaction
from remote_risk.storage.schema import used_tokens

# Expired rows are purged on the first claim and then at most once per this interval.
PURGE_INTERVAL_SECONDS = 60


class SQLReplayGuard:
    """A :class:`~remote_risk.replay.ReplayGuard` in the database behind ``engine``."""

    def __init__(
        self, engine: Engine, clock: Clock = utc_now, *, leeway: timedelta = timedelta(seconds=30)
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._leeway = int(leeway.total_seconds())
        self._purged_at: int | None = None

    def claim_task_creation(self, jti: str, exp: int, *, issuer: str) -> bool:
        now = int(self._clock().timestamp())
        try:
            self._purge_expired(now)
            with write_transaction(self._engine) as connection:
                connection.execute(
                    insert(used_tokens).values(
                        issuer=issuer, jti=jti, expires_at=exp + self._leeway
                    )
                )
        except IntegrityError:
            return False
        except SQLAlchemyError as exc:
            raise ReplayGuardUnavailable(f"cannot record the token: {type(exc).__name__}") from exc
        return True

    def _purge_expired(self, now: int) -> None:
        if self._purged_at is not None and now - self._purged_at < PURGE_INTERVAL_SECONDS:
            return
        with write_transaction(self._engine) as connection:
            connection.execute(delete(used_tokens).where(used_tokens.c.expires_at < now))
        self._purged_at = now
