"""Where the counterparty rules are kept: audit credentials per agent, heads by signer.

* A credential is tied to one agent and the origin it was registered from: kept 0600 in
  its own file (not in agents.json), never in its repr, refused for the agent once it is
  registered from another origin, and refused when it could not travel in a header.
* Revision 0007 gives every kept tree head its signer; rows kept before it get their
  ``kid``, which was the verifying key's thumbprint when they were verified.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from coordinator.errors import AuditCredentialError
from coordinator.remote.cards.audit_credentials import CREDENTIALS_FILE, AuditCredentials
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import AGENTS_FILE
from coordinator.storage.datadir import DataDir
from coordinator.storage.migrations import migrate
from tests.coordinator.conftest import EngineFactory

TOKEN = "a-token-for-one-agent"


def agent(name: str, card_url: str) -> RegisteredAgent:
    return RegisteredAgent(
        name=name, card_url=card_url, endpoint=card_url, card={}, registered_at="2026-01-01"
    )


def test_a_credential_is_kept_apart_private_and_for_its_origin_only(tmp_path: Path) -> None:
    data = DataDir(tmp_path)
    risk = agent("remote-risk", "http://127.0.0.1:8081/.well-known/agent-card.json")
    credentials = AuditCredentials(data)
    kept = credentials.set(risk, TOKEN + "\n")
    assert (kept.origin, kept.token) == ("http://127.0.0.1:8081", TOKEN)
    assert TOKEN not in repr(kept) and TOKEN not in str(kept.described())
    assert stat.S_IMODE(data.path(CREDENTIALS_FILE).stat().st_mode) == 0o600
    assert not data.path(AGENTS_FILE).exists()

    assert credentials.for_agent(risk).token == TOKEN
    with pytest.raises(AuditCredentialError) as missing:
        credentials.for_agent(agent("rogue", "http://127.0.0.1:9999/"))
    assert missing.value.reason == "audit_credential_missing"
    moved = risk.model_copy(update={"card_url": "http://127.0.0.1:9999/agent-card.json"})
    with pytest.raises(AuditCredentialError) as changed:
        credentials.for_agent(moved)
    assert changed.value.reason == "audit_credential_origin_changed"
    assert TOKEN not in str(changed.value)

    assert credentials.remove("remote-risk") and not credentials.remove("remote-risk")
    with pytest.raises(AuditCredentialError):
        credentials.for_agent(risk)


@pytest.mark.parametrize("token", ["", "two words", "tab\there", "é", "x" * 4097])
def test_a_token_that_cannot_travel_in_a_header_is_refused(tmp_path: Path, token: str) -> None:
    risk = agent("remote-risk", "http://127.0.0.1:8081/")
    with pytest.raises(AuditCredentialError) as refused:
        AuditCredentials(DataDir(tmp_path)).set(risk, token)
    assert refused.value.reason == "audit_credential_invalid"
    assert not DataDir(tmp_path).path(CREDENTIALS_FILE).exists()


def test_revision_0007_gives_kept_heads_their_signer(engine_factory: EngineFactory) -> None:
    engine = engine_factory()
    migrate(engine, "0006")
    row = {
        "log_id": "http://127.0.0.1:8081/a2a/jsonrpc",
        "origin": "witnessed",
        "tree_size": 3,
        "root_hash": "11" * 32,
        "issued_at": "2026-01-01T00:00:00.000000Z",
        "kid": "the-verifying-keys-thumbprint",
        "jws": "a.b.c",
        "recorded_at": "2026-01-01T00:00:00.000000Z",
    }
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO tree_heads (log_id, origin, tree_size, root_hash, issued_at, kid,"
                " jws, recorded_at) VALUES (:log_id, :origin, :tree_size, :root_hash,"
                " :issued_at, :kid, :jws, :recorded_at)"
            ),
            row,
        )
    migrate(engine)
    with engine.connect() as connection:
        signers = connection.execute(text("SELECT signer FROM tree_heads")).scalars().all()
    assert signers == ["the-verifying-keys-thumbprint"]
