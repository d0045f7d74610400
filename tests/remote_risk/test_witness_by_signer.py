"""remote_risk keeps the coordinators' heads under the key that verified them.

remote_risk trusts two issuers: our coordinator and another one, which holds its own key
and is hostile. Each sends a valid token carrying a head of its own log, of the same size
(the other's with another root, as a fork would look). ``GET /audit/witnessed?signer=T``
answers the heads verified by the key of thumbprint ``T`` only, so our coordinator's
reconcile reads its own heads and no other issuer's (which it would count as heads of
its ledger it did not sign: ``untrusted_key``, a disagreement it did not cause). A head
of our log signed by the other issuer's key is refused at the door, as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from agent_cards.keys import KeySet, SigningKey, TrustedKeys
from agent_cards.transparency.heads import sign_head
from member_kit.audit.witness import WitnessedHeads
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests import tokens
from tests.remote_risk.delegated import ISSUER, SCOPE, Caller
from tests.remote_risk.test_auth_http import refusal
from tests.servers import free_port, running
from tests.tokens import COORDINATOR_KEY, OTHER_ISSUER_KEY, header

OTHER_ISSUER = "urn:another-coordinator"
AUDIT_TOKEN = "remote-risk-audit-operator-token"


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[Caller, Any]]:
    """remote_risk on loopback trusting both issuers, its audit routes behind a token."""
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={
            ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()]),
            OTHER_ISSUER: TrustedKeys([OTHER_ISSUER_KEY.verification_key()]),
        },
        signing_keys=KeySet(active=SigningKey.generate()),
        audit_token=AUDIT_TOKEN,
    )
    app = create_app(settings)
    with running(app, port=port) as url:
        yield Caller(url, settings.agent_id), app


def send_with_head(
    caller: Caller, issuer: str, key: SigningKey, head: str, handoff: str
) -> httpx.Response:
    claims = tokens.delegation_claims(
        now=int(time.time()),
        issuer=issuer,
        audience=caller.audience,
        scope=SCOPE,
        handoff_id=handoff,
        jti=f"jti-{handoff}",
    )
    token = tokens.forge(header(key), {**claims, "log_head": head}, key=key.private_key)
    return caller.send(f"run-{handoff}", handoff, token=token)


def witnessed(caller: Caller, *signers: str) -> list[str]:
    response = httpx.get(
        f"{caller.base_url}/audit/witnessed",
        params={"signer": list(signers)},
        headers={"Authorization": f"Bearer {AUDIT_TOKEN}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    heads: list[str] = response.json()["heads"]
    return heads


def test_each_issuers_heads_are_answered_under_its_own_key(service: tuple[Caller, Any]) -> None:
    caller, _ = service
    ours = sign_head(5, b"\x01" * 32, COORDINATOR_KEY, ISSUER).jws
    theirs = sign_head(5, b"\x02" * 32, OTHER_ISSUER_KEY, OTHER_ISSUER).jws
    caller.task_of(send_with_head(caller, ISSUER, COORDINATOR_KEY, ours, "handoff-ours"))
    caller.task_of(send_with_head(caller, OTHER_ISSUER, OTHER_ISSUER_KEY, theirs, "handoff-other"))

    assert witnessed(caller, COORDINATOR_KEY.kid) == [ours]
    assert witnessed(caller, OTHER_ISSUER_KEY.kid) == [theirs]
    assert witnessed(caller, "a-thumbprint-nobody-has") == []
    assert sorted(witnessed(caller)) == sorted([ours, theirs])


def test_a_head_of_our_log_signed_by_another_issuer_is_refused(
    service: tuple[Caller, Any],
) -> None:
    caller, _ = service
    forged = sign_head(5, b"\x03" * 32, OTHER_ISSUER_KEY, ISSUER).jws
    response = send_with_head(caller, OTHER_ISSUER, OTHER_ISSUER_KEY, forged, "handoff-forged")
    assert refusal(response)[:2] == (401, "log_head_invalid")
    assert forged not in witnessed(caller)


def test_rr0005_gives_heads_kept_before_it_their_signer(database_url: str) -> None:
    """A head kept under rr0004 (verified with the key its kid named, a thumbprint) is
    kept under that signer after the upgrade, and answered for it."""
    engine = open_engine(database_url)
    try:
        migrate(engine, "rr0004")
        head = sign_head(2, b"\x04" * 32, COORDINATOR_KEY, ISSUER)
        row = {**head.as_dict(), "log_id": ISSUER, "recorded_at": "2026-01-01T00:00:00Z"}
        for name in ("iss", "issued_at"):
            row.pop(name)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO remote_risk_witnessed_heads (log_id, tree_size, root_hash,"
                    " kid, jws, recorded_at) VALUES (:log_id, :tree_size, :root_hash, :kid,"
                    " :jws, :recorded_at)"
                ),
                row,
            )
        migrate(engine)
        assert WitnessedHeads(engine).jws({COORDINATOR_KEY.kid}) == [head.jws]
        assert WitnessedHeads(engine).jws({OTHER_ISSUER_KEY.kid}) == []
    finally:
        engine.dispose()
