"""Calling a running coordinator's HTTP API: what the CLI uses with ``--server URL``.

httpx with explicit timeouts, no redirects followed and no proxy or certificate settings
taken from the environment. A refusal from the server becomes a
:class:`~coordinator.errors.FederationError` with the server's own reason, so the CLI
prints it exactly as it would print a local error.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from agent_cards import tls
from contracts import strict_json
from coordinator.errors import FederationError, ProtocolError, ServerRefused, UsageError, translated

# httpx imports its own command-line client (click, rich, pygments) whenever those are
# installed, which costs more than the rest of a --server command; this process never
# runs it, so it is marked absent and httpx keeps its stub (unless httpx came first).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
import httpx  # noqa: E402

CONNECT_TIMEOUT_SECONDS = 5.0
# a delegation with wait answers when the handoff ends; its own deadline bounds that
READ_TIMEOUT_SECONDS = 3600.0 + 60.0
MAX_ERROR_MESSAGE_CHARS = 500


def check_server_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--server must be an http(s) URL, not {url!r}", "bad_server_url")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError(
            "--server takes a plain base URL (no credentials, query or fragment)",
            "bad_server_url",
        )
    return url.rstrip("/")


class CoordinatorClient:
    """One connection pool to one coordinator, authenticated as its operator."""

    def __init__(
        self, base_url: str, token: str, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.base_url = check_server_url(base_url)
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=httpx.Timeout(READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
            follow_redirects=False,
            trust_env=False,
            verify=tls.verified(),
            transport=transport,
        )

    def __enter__(self) -> CoordinatorClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- the API, one method a route ----------------------------------------------------

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", "/v1/agents", body)

    def agents(self) -> list[dict[str, Any]]:
        value = self._call("GET", "/v1/agents")
        if not isinstance(value, list):
            raise ProtocolError("the coordinator's agent list is not a list", "invalid_shape")
        return value

    def agent(self, name: str) -> dict[str, Any]:
        return self._object("GET", f"/v1/agents/{_segment(name)}")

    def pending(self) -> list[dict[str, Any]]:
        value = self._call("GET", "/v1/pending-cards")
        if not isinstance(value, list):
            raise ProtocolError("the coordinator's pending cards are not a list", "invalid_shape")
        return value

    def refuse_pending(self, name: str) -> dict[str, Any]:
        return self._object("DELETE", f"/v1/pending-cards/{_segment(name)}")

    def remove_agent(self, name: str) -> dict[str, Any]:
        return self._object("DELETE", f"/v1/agents/{_segment(name)}")

    def delegate(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", "/v1/delegations", body)

    def runs(self, query: dict[str, Any] | None = None) -> dict[str, Any]:
        """One page of run summaries: ``{"runs": [...], "next_cursor": ...}``."""
        params = {k: v for k, v in (query or {}).items() if v is not None}
        page = self._object("GET", "/v1/runs", params=params)
        if not isinstance(page.get("runs"), list):
            raise ProtocolError("the coordinator's run list is not a list", "invalid_shape")
        return page

    def run(self, run_id: str) -> dict[str, Any]:
        return self._object("GET", f"/v1/runs/{_segment(run_id)}")

    def revoke(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", "/v1/revocations", body)

    def cancel(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", f"/v1/runs/{_segment(run_id)}/cancel", body)

    def jwks(self) -> dict[str, Any]:
        """The coordinator's public signing keys (a public route)."""
        return self._object("GET", "/.well-known/jwks.json")

    def audit_verify(self, bundle: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._object("POST", "/v1/audit/verify", {"bundle": bundle})

    def audit_show(self, run_id: str) -> dict[str, Any]:
        return self._object("GET", f"/v1/audit/runs/{_segment(run_id)}")

    def audit_export(self, run_id: str) -> dict[str, Any]:
        return self._object("GET", f"/v1/audit/runs/{_segment(run_id)}/export")

    def audit_prove(self, run_id: str) -> dict[str, Any]:
        return self._object("POST", f"/v1/audit/runs/{_segment(run_id)}/prove")

    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]:
        return self._object("POST", "/v1/audit/consistency", {"first": first, "second": second})

    def audit_reconcile(self, run_id: str) -> dict[str, Any]:
        return self._object("POST", f"/v1/audit/runs/{_segment(run_id)}/reconcile")

    def set_audit_credential(self, name: str, token: str) -> dict[str, Any]:
        path = f"/v1/agents/{_segment(name)}/audit-credential"
        return self._object("PUT", path, {"token": token})

    def remove_audit_credential(self, name: str) -> dict[str, Any]:
        return self._object("DELETE", f"/v1/agents/{_segment(name)}/audit-credential")

    # --- one request ----------------------------------------------------------------------

    def _object(
        self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        value = self._call(method, path, body, params)
        if not isinstance(value, dict):
            raise ProtocolError(f"{method} {path}: the answer is not an object", "invalid_shape")
        return value

    def _call(
        self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        content = strict_json.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        with translated(f"{method} {path}", self.base_url):
            response = self._http.request(
                method, path, content=content, headers=headers, params=params
            )
            value = strict_json.loads(response.content) if response.content else None
        if response.is_success:
            return value
        raise refusal(response.status_code, value)


def refusal(status: int, value: Any) -> FederationError:
    """The error the server's answer describes, or a protocol error if it describes none."""
    error = value.get("error") if isinstance(value, dict) else None
    if (
        isinstance(error, dict)
        and isinstance(error.get("reason"), str)
        and isinstance(error.get("message"), str)
    ):
        message = error["message"][:MAX_ERROR_MESSAGE_CHARS]
        return ServerRefused(status, message, error["reason"])
    return ProtocolError(f"the coordinator answered HTTP {status}", "unexpected_status")


def _segment(value: str) -> str:
    return quote(value, safe="")
