"""Server-side console sessions: a random cookie value names one, the server holds the rest.

A browser first gets an *anonymous* session (the login form's CSRF token lives there);
presenting the operator token on that form replaces it with an *authenticated* one under a
new cookie value (no session fixation). Every session has a CSRF token of its own (a
synchronizer token: forms carry it, the server compares it in constant time), an absolute
lifetime and an idle timeout. Sessions are kept by the SHA-256 of their cookie value, so
the table holds nothing a browser could present; they live in the serving process and end
with it (a restart logs everyone out). The table is bounded: past ``max_sessions`` the
oldest session of the same kind is dropped, so a flood of login forms cannot push out the
operators who are logged in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_LIFETIME_SECONDS = 8 * 3600.0
DEFAULT_IDLE_SECONDS = 30 * 60.0
ANONYMOUS_LIFETIME_SECONDS = 15 * 60.0
DEFAULT_MAX_SESSIONS = 1000
COOKIE_BYTES = 32


@dataclass
class Session:
    csrf: str
    authenticated: bool
    created: float
    last_seen: float
    lifetime: float
    idle: float

    def expired(self, now: float) -> bool:
        return now - self.created > self.lifetime or now - self.last_seen > self.idle

    def csrf_matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.csrf.encode())


def _key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


@dataclass
class SessionStore:
    lifetime: float = DEFAULT_LIFETIME_SECONDS
    idle: float = DEFAULT_IDLE_SECONDS
    max_sessions: int = DEFAULT_MAX_SESSIONS
    clock: Callable[[], float] = time.monotonic
    _sessions: dict[str, Session] = field(default_factory=dict)

    def open(self, *, authenticated: bool) -> tuple[str, Session]:
        """A new session and the cookie value that names it (shown to nobody else)."""
        now = self.clock()
        self._sweep(now, authenticated)
        cookie = secrets.token_urlsafe(COOKIE_BYTES)
        lifetime = (
            self.lifetime if authenticated else min(self.lifetime, ANONYMOUS_LIFETIME_SECONDS)
        )
        session = Session(
            csrf=secrets.token_urlsafe(COOKIE_BYTES),
            authenticated=authenticated,
            created=now,
            last_seen=now,
            lifetime=lifetime,
            idle=min(self.idle, lifetime),
        )
        self._sessions[_key(cookie)] = session
        return cookie, session

    def find(self, cookie: str | None) -> Session | None:
        """The live session ``cookie`` names (its idle clock restarted), else None."""
        if not cookie:
            return None
        key = _key(cookie)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = self.clock()
        if session.expired(now):
            del self._sessions[key]
            return None
        session.last_seen = now
        return session

    def close(self, cookie: str | None) -> None:
        if cookie:
            self._sessions.pop(_key(cookie), None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _sweep(self, now: float, authenticated: bool) -> None:
        for key in [k for k, s in self._sessions.items() if s.expired(now)]:
            del self._sessions[key]
        same = [
            (s.created, k) for k, s in self._sessions.items() if s.authenticated is authenticated
        ]
        for _, key in sorted(same)[: max(0, len(same) - self.max_sessions + 1)]:
            del self._sessions[key]
