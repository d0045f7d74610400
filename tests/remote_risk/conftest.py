"""Shared helpers: a real risk service on loopback, a raw JSON-RPC caller, and databases.

``postgres_server`` and ``postgres_url`` are the coordinator's PostgreSQL fixtures (a fresh
schema per test; skipped when the server is unreachable unless
``FEDERATION_REQUIRE_POSTGRES=1``); ``database_url`` is an empty SQLite file or such a
schema.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from agent_cards import tls
from coordinator.assessment.scenario import CONTEXT_KEYS, context_for
from member_kit.server.app import JSONRPC_PATH
from member_kit.server.jsonrpc import Authorize, anonymous
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.coordinator.conftest import postgres_server, postgres_url
from tests.servers import free_port, running

__all__ = ["postgres_server", "postgres_url"]

_ids = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def migrated_engine(database_url: str) -> Iterator[Engine]:
    """The member's database at ``database_url``, migrated to the head revision."""
    opened = open_engine(database_url)
    migrate(opened)
    yield opened
    opened.dispose()


def risk_input(case: str = "ok") -> dict[str, Any]:
    """The context the coordinator projects for risk in ``case``."""
    context = context_for(case)
    return {key: context[key] for key in CONTEXT_KEYS["risk"] if key in context}


def binding_of(task: dict[str, Any]) -> dict[str, Any]:
    """The handoff binding a task echoes in its metadata (beside the receipts extension's)."""
    metadata = task.get("metadata") or {}
    return {key: metadata[key] for key in ("handoffId", "attempt") if key in metadata}


def user_message(data: Any, **extra: Any) -> dict[str, Any]:
    return {
        "messageId": f"m-{next(_ids)}",
        "role": "ROLE_USER",
        "parts": [{"data": data, "mediaType": "application/json"}],
        **extra,
    }


class RiskPeer:
    """A running risk service and a plain httpx client speaking raw JSON-RPC to it."""

    def __init__(self, base_url: str, app: Any) -> None:
        self.base_url = base_url
        self.app = app
        self.http = httpx.Client(
            base_url=base_url,
            headers={"A2A-Version": "1.0"},
            timeout=10,
            verify=tls.verified(),
        )

    def call(self, method: str, params: Any = None, **headers: str) -> dict[str, Any]:
        """POST one JSON-RPC request and return the decoded response body."""
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method}
        if params is not None:
            body["params"] = params
        response = self.http.post(JSONRPC_PATH, json=body, headers=headers)
        assert response.status_code == 200
        decoded: dict[str, Any] = response.json()
        assert decoded["id"] == body["id"]
        return decoded

    def result(self, method: str, params: Any = None) -> Any:
        decoded = self.call(method, params)
        assert "error" not in decoded, decoded
        return decoded["result"]

    def send(self, data: Any, configuration: dict[str, Any] | None = None) -> dict[str, Any]:
        """SendMessage with one data part; returns the task."""
        params: dict[str, Any] = {"message": user_message(data)}
        if configuration is not None:
            params["configuration"] = configuration
        task: dict[str, Any] = self.result("SendMessage", params)["task"]
        return task

    def post_raw(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST exactly ``body`` with exactly ``headers`` (no client defaults added)."""
        return httpx.post(self.base_url + JSONRPC_PATH, content=body, headers=headers, timeout=10)


@contextmanager
def risk_peer(authorize: Authorize = anonymous, **settings: Any) -> Iterator[RiskPeer]:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    app = create_app(Settings(public_base_url=base_url, **settings), authorize=authorize)
    with running(app, port=port) as url:
        peer = RiskPeer(url, app)
        try:
            yield peer
        finally:
            peer.http.close()


@pytest.fixture
def peer() -> Iterator[RiskPeer]:
    with risk_peer() as running_peer:
        yield running_peer


def error_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in response, response
    error: dict[str, Any] = response["error"]
    return error


def reason(error: dict[str, Any]) -> str:
    (info,) = error["data"]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["domain"] == "a2a-protocol.org"
    value: str = info["reason"]
    return value
