"""Holder-bound children (RFC 9449 DPoP across a chain): a child minted by token exchange
names the key of the member that proved it holds the parent (``cnf.jkt``), so a child
captured on the wire between member A and member B is useless without A's private key.

A real coordinator process (``FEDERATION_HOLDER_PROOF=1``: its own tokens bound to its
key) and kit members on loopback; the test acts as the privacy team (its key in hand),
as a thief (no key), or as another member (its own key).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_cards.identity import THUMBPRINT_URI_PREFIX
from contracts.chain import link_problem
from contracts.grant import Grant
from tests.chains import (
    PRIVACY,
    TERMS,
    TERMS_2,
    ChainFederation,
    chain_federation,
    claims_of,
    half,
)

TEXT = {"text": "No refunds.", "terms": ["refund"]}
COMPLETED = "TASK_STATE_COMPLETED"


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainFederation]:
    root = tmp_path_factory.mktemp("holdchain")
    with chain_federation(root, FEDERATION_HOLDER_PROOF="1") as federation:
        yield federation


def child_of(chain: ChainFederation) -> tuple[dict[str, str], Grant, str]:
    """A child for the legal team exchanged by the privacy team from a fresh parent: the
    owner's answer, the child's claims and the parent token."""
    token, parent, _ = chain.parent_token()
    assert parent.cnf is not None  # the first hop is bound to the coordinator's key
    answer = chain.exchange(token, PRIVACY, TERMS, half(parent))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return body, Grant.model_validate(claims_of(body["access_token"])), token


def test_the_child_names_the_key_of_the_holder_that_proved_the_exchange(
    chain: ChainFederation,
) -> None:
    _, child, token = child_of(chain)
    parent = Grant.model_validate(claims_of(token))
    assert child.cnf is not None
    assert child.cnf.jkt == chain.keys[PRIVACY].active.kid
    assert THUMBPRINT_URI_PREFIX + child.cnf.jkt == parent.aud  # the holder: parent's aud
    assert link_problem(child, parent, token) is None


@pytest.mark.parametrize(
    ("prover", "expected"),
    [(None, "holder_proof_missing"), (TERMS_2, "holder_key_mismatch")],
    ids=["captured_without_a_proof", "proved_by_another_members_key"],
)
def test_a_captured_child_without_its_holders_key_is_refused(
    chain: ChainFederation, prover: str | None, expected: str
) -> None:
    body, _, _ = child_of(chain)
    stolen = chain.send(
        body["endpoint"], body["access_token"], body["handoff_id"], TEXT, prover=prover
    )
    assert "result" not in stolen, stolen
    assert stolen["error"]["data"][0]["metadata"]["reason"] == expected, stolen
    # the holder itself, with a fresh proof by its key, is served
    done = chain.send(body["endpoint"], body["access_token"], body["handoff_id"], TEXT)
    assert done["result"]["task"]["status"]["state"] == COMPLETED, done


def test_the_kits_one_call_proves_the_child_and_the_chain_completes(
    chain: ChainFederation,
) -> None:
    """The privacy team's skill sub-delegates with ``delegate(...)``: the kit sends the
    child with a fresh proof by its own key, and the legal team's task completes."""
    chain.capture.relay = True
    try:
        before = len(chain.capture.relayed)
        chain.parent_token()
        [task] = chain.capture.relayed[before:]
    finally:
        chain.capture.relay = False
    assert isinstance(task, dict), task
    assert task["status"]["state"] == COMPLETED, task


def test_a_proof_replayed_with_the_child_is_refused(chain: ChainFederation) -> None:
    """A proof captured with the child is good for that one request only."""
    from agent_cards.dpop import PROOF_HEADER, proof

    body, _, _ = child_of(chain)
    key = chain.keys[PRIVACY].active
    captured = proof(key, "POST", body["endpoint"], body["access_token"])
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "GetTask",
        "params": {"id": "no-such-task"},
    }
    headers = {
        "Authorization": f"Bearer {body['access_token']}",
        "A2A-Version": "1.0",
        PROOF_HEADER: captured,
    }
    first = chain.client.post(body["endpoint"], json=request, headers=headers).json()
    assert "holder_proof" not in str(first), first
    again = chain.client.post(body["endpoint"], json=request, headers=headers).json()
    assert again["error"]["data"][0]["metadata"]["reason"] == "holder_proof_replayed", again
