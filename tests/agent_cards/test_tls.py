"""Every HTTP client shares one verifying TLS context per process, and still verifies.

A real HTTPS server on loopback presents a self-signed certificate: the key fetch of a
member (at start and at refresh), the guard's card fetch and the coordinator's client
each refuse it, all given the process's one context (:mod:`agent_cards.tls`).
"""

from __future__ import annotations

import asyncio
import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agent_cards import tls
from coordinator.errors import FederationError
from coordinator.remote.wire.client import A2AClient
from member_kit import errors as kit_errors
from member_kit.guard import upstream
from member_kit.trust import refresh
from member_kit.trust.issuers import TrustConfigError, fetch_jwks
from tests.coordinator.test_keepalive_client import certificate


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"keys": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def https_server(context: ssl.SSLContext) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def test_one_verifying_context_per_process() -> None:
    context = tls.verified()
    assert context is tls.verified()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_every_client_refuses_a_certificate_nobody_trusts(tmp_path: Path) -> None:
    server_tls, _ = certificate(tmp_path)
    with https_server(server_tls) as url:
        with pytest.raises(TrustConfigError):
            fetch_jwks(url)
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(refresh.fetch(url, None))
        with pytest.raises(kit_errors.UpstreamCardInvalid, match="cannot fetch"):
            upstream.fetch_card(url, max_bytes=10_000, timeout=5)

        async def card() -> None:
            async with A2AClient() as client:
                await client.fetch_card(url)

        with pytest.raises(FederationError):
            asyncio.run(card())


def test_a_client_trusting_the_certificate_is_answered(tmp_path: Path) -> None:
    """The server itself works: the refusals above are the certificate's."""
    server_tls, client_tls = certificate(tmp_path)
    with https_server(server_tls) as url:
        assert httpx.get(url, verify=client_tls).json() == {"keys": []}
