"""A token-checking risk service on loopback and a caller that sends as the coordinator does.

Each send carries ``handoffId``, ``attempt`` and ``idempotencyKey`` in its metadata and a
fresh delegation token bound to that handoff attempt (unless a token is given). Another
member of ``tests/members.py`` is served and called the same way when named (its skill,
scope and input); remote_risk by default.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from agent_cards import tls
from agent_cards.keys import KeySet, SigningKey, TrustedKeys
from member_kit.server.app import JSONRPC_PATH
from remote_risk.settings import Settings
from tests import tokens
from tests.members import RISK, MemberUnderTest
from tests.servers import free_port, running
from tests.tokens import COORDINATOR_KEY, header

ISSUER = "urn:a2a-federation:coordinator"
SCOPE = "risk:interpret"
SKILL = "interpret-risk-policy"
_ids = itertools.count(1)


def trusted_settings(public_base_url: str, **changes: Any) -> Settings:
    """Settings trusting the test coordinator's key, with a card key of its own (unless
    ``changes`` give one: the service's identity is derived from it)."""
    return Settings(**trusted_changes(public_base_url, **changes))


def trusted_changes(public_base_url: str, **changes: Any) -> dict[str, Any]:
    """The settings' fields of :func:`trusted_settings`, for any member's settings."""
    changes.setdefault("signing_keys", KeySet(active=SigningKey.generate()))
    trusted = {ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()])}
    return dict(public_base_url=public_base_url, trusted_issuers=trusted, **changes)


class Caller:
    """One principal ``(ISSUER, sub, tenant-a)`` calling the service at ``base_url``,
    which is ``member`` (remote_risk unless told)."""

    def __init__(
        self, base_url: str, audience: str, sub: str = "alice", member: MemberUnderTest = RISK
    ) -> None:
        self.base_url = base_url
        self.audience = audience
        self.sub = sub
        self.member = member

    def token(self, handoff_id: str, attempt: int = 1, jti: str | None = None) -> str:
        claims = tokens.delegation_claims(
            now=int(time.time()),
            issuer=ISSUER,
            audience=self.audience,
            scope=self.member.scope,
            handoff_id=handoff_id,
            jti=jti or f"jti-{next(_ids)}",
            sub=self.sub,
        )
        claims = tokens.with_handoff(claims, attempt=attempt)
        return tokens.forge(header(), claims)

    # How long a call waits for its answer (seconds).
    timeout = 10.0

    def call(self, method: str, params: dict[str, Any], token: str) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        return httpx.post(
            self.base_url + JSONRPC_PATH,
            json=body,
            headers=headers,
            timeout=self.timeout,
            verify=tls.verified(),
        )

    def send(
        self,
        run_id: str,
        handoff_id: str,
        attempt: int = 1,
        *,
        token: str | None = None,
        key: str | None = None,
        configuration: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """SendMessage for one handoff attempt, keyed ``run_id:handoff_id`` as the coordinator
        keys it (or ``key``)."""
        metadata = {
            "handoffId": handoff_id,
            "attempt": attempt,
            "skillId": self.member.skill,
            "idempotencyKey": key or f"{run_id}:{handoff_id}",
        }
        message = {
            "messageId": f"m-{next(_ids)}",
            "role": "ROLE_USER",
            "parts": [{"data": self.member.valid_input(), "mediaType": "application/json"}],
            "metadata": metadata,
        }
        params: dict[str, Any] = {"message": message}
        if configuration is not None:
            params["configuration"] = configuration
        return self.call("SendMessage", params, token or self.token(handoff_id, attempt))

    def task_of(self, response: httpx.Response) -> dict[str, Any]:
        assert response.status_code == 200, response.text
        decoded = response.json()
        assert "error" not in decoded, decoded
        task: dict[str, Any] = decoded["result"]["task"]
        return task

    def get_task(self, task_id: str, handoff_id: str) -> httpx.Response:
        """GetTask with a token for ``handoff_id``: a token sees only its handoff's tasks."""
        return self.call("GetTask", {"id": task_id}, self.token(handoff_id))


def refusal_reason(response: httpx.Response) -> tuple[int, str]:
    """The HTTP status and the stable reason code of a refused request."""
    (info,) = response.json()["error"]["data"]
    return response.status_code, info["metadata"]["reason"]


@contextmanager
def delegated_service(
    port: int | None = None,
    public_base_url: str | None = None,
    *,
    member: MemberUnderTest = RISK,
    **changes: Any,
) -> Iterator[tuple[Caller, Any]]:
    """A running token-checking ``member`` and a caller for it; ``changes`` go to its
    settings."""
    port = port or free_port()
    public_base_url = public_base_url or f"http://127.0.0.1:{port}"
    app = member.create_app(**trusted_changes(public_base_url, **changes))
    with running(app, port=port) as url:
        yield Caller(url, app.state.settings.agent_id, member=member), app
