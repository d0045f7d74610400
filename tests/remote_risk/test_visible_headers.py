"""What an operation is given of its request's headers: everything but the credentials."""

from __future__ import annotations

from starlette.requests import Request

from member_kit.server.authorization.hook import VisibleHeaders


def test_an_operation_sees_the_request_headers_but_the_credentials() -> None:
    """What an operation is given of the request's headers (CallContext.headers) never
    holds the token, a cookie or proxy credentials, however it reads them."""
    raw = [
        (b"authorization", b"Bearer secret-token"),
        (b"cookie", b"session=1"),
        (b"proxy-authorization", b"Basic eA=="),
        (b"a2a-version", b"1.0"),
        (b"x-trace-note", b"kept"),
    ]
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": raw})
    visible = VisibleHeaders(request)
    assert dict(visible) == {"a2a-version": "1.0", "x-trace-note": "kept"}
    assert len(visible) == 2 and "authorization" not in visible and "cookie" not in visible
    assert visible["x-trace-note"] == "kept"
    assert "secret-token" not in repr(dict(visible.items()))
