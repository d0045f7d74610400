"""One remote's audit log as reconcile asks it: its operator routes, at the origin the
operator registered it from only, with the credential registered for that agent alone,
and its tree heads verified with the keys pinned for it."""

from __future__ import annotations

from typing import Any

import httpx

from agent_cards import tls
from agent_cards.jwk import thumbprint_of
from agent_cards.transparency.heads import Head, verify_head
from agent_cards.transparency.statements import StatementInvalid
from contracts import strict_json
from coordinator.dispatch.attempt.receipts import pinned_keys
from coordinator.errors import ProtocolError, TransportError, UsageError
from coordinator.remote.cards.audit_credentials import AuditCredential
from coordinator.remote.cards.registered_agent import RegisteredAgent

# What a remote's status code says of its audit routes: not a disagreement, a check not made.
REFUSED_BY_STATUS = {401: "remote_audit_refused", 403: "remote_audit_refused",
                     404: "remote_audit_not_found"}  # fmt: skip


class RemoteAudit:
    """The operator routes of one remote's audit log, at its pinned origin only."""

    def __init__(
        self, agent: RegisteredAgent, credential: AuditCredential, timeout: float = 10.0
    ) -> None:
        self.agent = agent
        self.keys = pinned_keys(agent)  # none pinned: no head of it verifies
        self._base = credential.origin
        self._headers = {"Authorization": f"Bearer {credential.token}"}
        self._timeout = timeout

    @property
    def signers(self) -> frozenset[str]:
        """The thumbprints, computed here, of the keys pinned for the agent."""
        return frozenset(thumbprint_of(key.public_key) for key in self.keys)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        try:
            response = httpx.get(
                self._base + path,
                params=params,
                headers=self._headers,
                timeout=self._timeout,
                follow_redirects=False,
                trust_env=False,  # no proxy from the environment sees the credential
                verify=tls.verified(),
            )
        except httpx.HTTPError as exc:
            raise TransportError(f"{self.agent.name}: {exc}", "remote_unavailable") from None
        if response.status_code != 200:
            reason = REFUSED_BY_STATUS.get(response.status_code, "remote_error")
            raise ProtocolError(
                f"{self.agent.name} answered {response.status_code} for {path}", reason
            )
        return _object(self.agent.name, response)

    def head(self, jws: Any) -> Head:
        try:
            return verify_head(jws, self.keys)
        except StatementInvalid as exc:
            raise UsageError(f"{self.agent.name}'s tree head: {exc}", "head_invalid") from None


def _object(name: str, response: httpx.Response) -> dict[str, Any]:
    try:
        document = strict_json.loads(response.content)
    except strict_json.StrictJSONError as exc:  # not_json, or json_too_deep
        message = f"{name} answered something that is not JSON we read: {exc}"
        raise ProtocolError(message, exc.reason) from None
    if not isinstance(document, dict):
        raise ProtocolError(f"{name} answered JSON that is not an object", "not_json")
    return document
