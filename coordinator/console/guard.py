"""What every console request passes: response headers, the session, the CSRF token.

* :class:`SecurityHeaders` puts a strict Content-Security-Policy (nothing but this
  origin's own files; no inline script or style, no framing, forms post only here),
  ``nosniff``, ``no-referrer`` and ``no-store`` on every response under the prefix,
  refusals and errors included.
* :meth:`Guard.session` is the one check of a request's session: a page without one is
  sent to the login form (303), anything else is refused 401.
* :meth:`Guard.form` reads a state-changing request's form (URL-encoded, bounded) and
  checks its ``csrf`` field against the session's token in constant time: 403 with the
  reason (``csrf_missing``, ``csrf_invalid``) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_cards.edge.operator_secret import OperatorSecret
from agent_cards.edge.throttle import retry_after_header
from coordinator.console.sessions import Session, SessionStore
from coordinator.console.throttle import LoginThrottle

COOKIE = "federation_console"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
MAX_FORM_BYTES = 16 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"


class ConsoleRefusal(Exception):
    """A console request refused: ``status``, a stable ``reason`` and a sentence."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        login: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.login = login
        self.headers = headers or {}


class SecurityHeaders:
    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


def wants_page(request: Request) -> bool:
    """A browser navigating (GET of HTML), as opposed to a script or another client."""
    accept = request.headers.get("accept", "")
    polled = request.url.path.endswith(".json")
    return request.method == "GET" and not polled and "text/html" in accept


@dataclass
class Guard:
    sessions: SessionStore
    logins: LoginThrottle = field(default_factory=LoginThrottle)

    def session(self, request: Request) -> Session:
        session = self.sessions.find(request.cookies.get(COOKIE))
        if session is None or not session.authenticated:
            raise ConsoleRefusal(
                401, "session_missing", "log in to the console first", login=wants_page(request)
            )
        return session

    async def form(self, request: Request, session: Session) -> dict[str, str]:
        """The request's form fields once its CSRF token matches the session's."""
        fields = await read_form(request)
        presented = fields.get("csrf")
        if not presented:
            raise ConsoleRefusal(403, "csrf_missing", "the form carries no CSRF token")
        if not session.csrf_matches(presented):
            raise ConsoleRefusal(403, "csrf_invalid", "the form's CSRF token is not this session's")
        return fields


def client_of(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def token_accepted(guard: Guard, request: Request, token: OperatorSecret, presented: str) -> bool:
    """Whether the login form's token is the operator's, by the edge's one judgment: the
    right token always passes; a wrong one is refused 429 once its address or itself
    failed too often."""
    judged = token.judge(presented.encode(), client_of(request), guard.logins)
    if judged.retry_after is not None:
        raise ConsoleRefusal(
            429,
            "login_throttled",
            "too many failed logins from here, or with this token; try again later",
            headers=retry_after_header(judged.retry_after),
        )
    return judged.passed


async def read_form(request: Request) -> dict[str, str]:
    """A URL-encoded form: bounded, each field once, UTF-8; refused otherwise."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    body = await request.body()
    if body and media != FORM_TYPE:
        raise ConsoleRefusal(415, "form_expected", f"send the form as {FORM_TYPE}")
    if len(body) > MAX_FORM_BYTES:
        raise ConsoleRefusal(413, "form_too_large", f"a form is at most {MAX_FORM_BYTES} bytes")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise ConsoleRefusal(400, "form_malformed", "the form is not URL-encoded UTF-8") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise ConsoleRefusal(400, "form_repeated_field", f"field {name!r} given twice")
        fields[name] = value
    return fields
