"""Audit credentials: the bearer token the operator gave for ONE agent's audit routes.

``federation agents audit-credential NAME --token-file FILE`` keeps it in the data
directory's ``audit-credentials.json`` (mode 0600, apart from ``agents.json``, which
every ``agents`` command prints), as::

    {"<agent name>": {"origin": "https://risk.example:8443", "token": "...", "set_at": "..."}}

``origin`` is that of the card URL the operator registered the agent from (scheme, host,
port), at the moment the credential was set. :meth:`AuditCredentials.for_agent` hands the
credential out only for that agent and only while it is still registered from that
origin, and :mod:`coordinator.service.remote_audit` sends it only there: never to a URL a
card, receipt or head names, never to another agent. An agent registered anew from
another origin has no credential until the operator sets one again. The token is never
printed, logged or put in a report; a shared token for every agent does not exist.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cards.clock import utc_now
from contracts import strict_json
from coordinator.audit.log.events import timestamp
from coordinator.errors import AuditCredentialError, DataDirError
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.trust_anchor import origin_of
from coordinator.storage.datadir import DataDir

CREDENTIALS_FILE = "audit-credentials.json"
MAX_TOKEN_LENGTH = 4096
MISSING = "audit_credential_missing"
ORIGIN_CHANGED = "audit_credential_origin_changed"
INVALID = "audit_credential_invalid"
EXPOSED = "audit_credentials_exposed"


@dataclass(frozen=True)
class AuditCredential:
    """One agent's audit token and the only origin it may be sent to."""

    agent: str
    origin: str
    token: str = field(repr=False)

    def described(self) -> dict[str, Any]:
        """What may be shown of it: whose, and where it goes (never the token)."""
        return {"agent": self.agent, "origin": self.origin}


def checked_token(text: str) -> str:
    """The token read from a file, its line end dropped: visible ASCII, one line."""
    token = text.strip()
    if not token or len(token) > MAX_TOKEN_LENGTH:
        raise AuditCredentialError(f"an audit token is 1 to {MAX_TOKEN_LENGTH} characters", INVALID)
    if not all("!" <= char <= "~" for char in token):
        raise AuditCredentialError(
            "an audit token is visible ASCII without spaces (it goes in a header)", INVALID
        )
    return token


class AuditCredentials:
    """The data directory's audit credentials, one per registered agent."""

    def __init__(self, data: DataDir) -> None:
        self.data = data

    @property
    def path(self) -> Path:
        return self.data.path(CREDENTIALS_FILE)

    def set(self, agent: RegisteredAgent, token: str) -> AuditCredential:
        """Tie ``token`` to ``agent`` at the origin it is registered from now."""
        credential = AuditCredential(agent.name, origin_of(agent.card_url), checked_token(token))
        stored = self._stored()
        stored[agent.name] = {
            "origin": credential.origin,
            "token": credential.token,
            "set_at": timestamp(utc_now()),
        }
        self._write(stored)
        return credential

    def remove(self, name: str) -> bool:
        """Forget ``name``'s credential; False when it had none."""
        stored = self._stored()
        if stored.pop(name, None) is None:
            return False
        self._write(stored)
        return True

    def for_agent(self, agent: RegisteredAgent) -> AuditCredential:
        """``agent``'s credential, if it is still registered from the origin it was set
        for; else :class:`AuditCredentialError` (``audit_credential_missing``,
        ``audit_credential_origin_changed``)."""
        self._check_private()
        entry = self._stored().get(agent.name)
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            raise AuditCredentialError(
                f"no audit credential is registered for {agent.name} "
                f"(federation agents audit-credential {agent.name} --token-file FILE)",
                MISSING,
            )
        origin = origin_of(agent.card_url)
        if entry.get("origin") != origin:
            raise AuditCredentialError(
                f"the audit credential of {agent.name} was set for {entry.get('origin')}, "
                f"and {agent.name} is now registered from {origin}: set it again",
                ORIGIN_CHANGED,
            )
        return AuditCredential(agent.name, origin, entry["token"])

    def _check_private(self) -> None:
        """Refuse to hand out any token from a file others can read (it is written 0600;
        a later chmod or a copy kept with its mode exposes them): ``audit_credentials_exposed``
        until the operator sets the credentials again, which writes the file 0600 anew."""
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise DataDirError(f"cannot read {CREDENTIALS_FILE}: {exc}") from None
        if mode & 0o077:
            raise AuditCredentialError(
                f"{CREDENTIALS_FILE} is readable or writable by others (mode "
                f"{mode & 0o777:o}): its tokens may have been read; rotate them with the "
                "agents, then set each again (federation agents audit-credential)",
                EXPOSED,
            )

    def _stored(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        try:
            stored = strict_json.loads(self.path.read_bytes())
        except (OSError, ValueError) as exc:
            raise DataDirError(f"cannot read {CREDENTIALS_FILE}: {exc}") from None
        return stored if isinstance(stored, dict) else {}

    def _write(self, stored: dict[str, Any]) -> None:
        """Atomically, created 0600 (never readable by others, not even for a moment)."""
        temporary = self.path.with_suffix(".json.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.unlink(missing_ok=True)
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(strict_json.dumps(stored))
            os.replace(temporary, self.path)
        except OSError as exc:
            raise DataDirError(f"cannot write {CREDENTIALS_FILE}: {exc}") from None
