"""One signature per receipt: the member's receipt states its decision log itself.

remote_risk on loopback, its decision log in a database, its audit routes behind a
token. A blocking send is answered with a receipt carrying ``log_tree_size`` and
``log_root_hash``, and no separately signed head (``log_head``): the member signs one
statement for the send, counted at the one signature module every statement is signed
through. Seen from outside, the claims are the log's: the receipt's entry is the last one
they cover, its recorded data are the receipt's other claims, and the member's current
log extends them (an RFC 9162 consistency proof from the audit routes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_cards.signatures import primitive
from agent_cards.transparency import merkle
from agent_cards.transparency.entries import DECISION_ON_RECEIPT, decision_in
from agent_cards.transparency.heads import verify_head
from agent_cards.transparency.logged import verify_logged
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI, verified_receipt
from agent_cards.trusted import TrustedKeys
from contracts import strict_json
from tests.remote_risk.delegated import Caller, delegated_service

AUDIT_TOKEN = "remote-risk-audit-operator-token-0123"


@pytest.fixture
def service(database_url: str) -> Iterator[tuple[Caller, Any]]:
    with delegated_service(database_url=database_url, audit_token=AUDIT_TOKEN) as running:
        yield running


def audit(caller: Caller, path: str, **params: Any) -> dict[str, Any]:
    response = httpx.get(
        caller.base_url + path,
        params=params,
        headers={"Authorization": f"Bearer {AUDIT_TOKEN}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document


def signed_during(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every message signed in this process from now on (the member runs in it)."""
    signed: list[bytes] = []
    real = primitive.sign

    def counted(key: Any, message: bytes) -> bytes:
        signed.append(message)
        return real(key, message)

    monkeypatch.setattr(primitive, "sign", counted)
    return signed


def test_a_send_is_one_signature_and_its_receipt_states_the_log(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    caller, app = service
    keys = TrustedKeys([app.state.settings.signing_keys.active.verification_key()])
    caller.task_of(caller.send("run-warm", "ho-warm"))  # a first entry or two before ours
    token = caller.token("ho-one")
    signed = signed_during(monkeypatch)
    task = caller.task_of(caller.send("run-one", "ho-one", token=token))
    monkeypatch.undo()
    assert len(signed) == 1  # the receipt, and no head beside it

    receipt = task["metadata"][RECEIPTS_EXTENSION_URI]["receipt"]
    claims = verified_receipt(receipt, keys)
    assert "log_head" not in claims
    head = verify_logged(receipt, keys)
    assert (head.tree_size, head.root_hash) == (claims["log_tree_size"], claims["log_root_hash"])

    app.state.audit_log.flush()  # the decision-log thread's writes too (PostgreSQL)
    covered = audit(caller, "/audit/handoffs/ho-one")
    (entry,) = [e for e in covered["entries"] if '"kind":"receipt"' in e["canonical"]]
    assert entry["seq"] == head.tree_size  # the receipt's own entry is the last it covers
    recorded = strict_json.loads(entry["canonical"])["data"]
    unlogged = {k: v for k, v in claims.items() if k not in ("log_tree_size", "log_root_hash")}
    # the send's decision rides on its receipt's entry where it waited for the loop
    # (SQLite); on PostgreSQL the decision-log thread enters it alone
    rode = recorded.pop(DECISION_ON_RECEIPT, None)
    assert (rode is not None) == (app.state.durable_store.engine.dialect.name == "sqlite")
    assert recorded == unlogged
    records = [strict_json.loads(e["canonical"]) for e in covered["entries"]]
    decisions = [d for d in map(decision_in, records) if d is not None]
    assert [(d["allowed"], d["jti"]) for d in decisions] == [(True, claims["jti"])]  # once

    extended = audit(caller, "/audit/consistency", **{"from": head.tree_size})
    current = verify_head(extended["tree_head"], keys)
    proof = [bytes.fromhex(node) for node in extended["proof"]]
    assert merkle.verify_consistency(
        head.tree_size, current.tree_size, head.root, current.root, proof
    )
