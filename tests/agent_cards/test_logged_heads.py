"""A head of a member's log read from either statement that states it: a signed tree head
(the older form, ``log_head``), or a receipt carrying the log's size and root itself.

Both verify with the member's pinned key only and in its own name; a receipt states a
head only when its log claims are well formed (``log_claims_invalid`` otherwise), and a
receipt stating no log is no head (``head_invalid``).
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey, TrustedKeys
from agent_cards.transparency.heads import sign_head
from agent_cards.transparency.logged import (
    LOG_CLAIMS_INVALID,
    head_of_receipt,
    log_claims,
    verify_logged,
)
from agent_cards.transparency.receipts import issue_receipt
from agent_cards.transparency.statements import StatementInvalid, unverified_header

KEY = SigningKey.generate()
OTHER = SigningKey.generate()
PINNED = TrustedKeys([KEY.verification_key()])
ISSUER = identity_of(KEY.verification_key())
ROOT = bytes.fromhex("ab" * 32)
ISSUED_AT = "2026-01-01T00:00:00.000Z"


def receipt(key: SigningKey = KEY, **log: Any) -> str:
    claims = {"iss": identity_of(key.verification_key()), "task_id": "t", "state": "done"}
    return issue_receipt({**claims, "issued_at": ISSUED_AT, **log}, key)


def test_a_receipt_with_log_claims_states_the_head_a_tree_head_would() -> None:
    jws = receipt(**log_claims(7, ROOT))
    head = verify_logged(jws, PINNED)
    assert (head.iss, head.tree_size, head.root, head.issued_at) == (ISSUER, 7, ROOT, ISSUED_AT)
    assert (head.kid, head.jws) == (KEY.kid, jws)
    signed = sign_head(7, ROOT, KEY, ISSUER)
    assert verify_logged(signed.jws, PINNED) == signed


def test_log_claims_are_named_as_the_heads_claims() -> None:
    assert log_claims(3, ROOT) == {"log_tree_size": 3, "log_root_hash": ROOT.hex()}


def test_a_receipt_stating_no_log_is_no_head() -> None:
    jws = receipt()
    claims = {"iss": ISSUER, "issued_at": ISSUED_AT}
    assert head_of_receipt(claims, KEY.kid, jws) is None
    with pytest.raises(StatementInvalid) as refused:
        verify_logged(jws, PINNED)
    assert refused.value.reason == "head_invalid"


@pytest.mark.parametrize(
    "log",
    [
        {"log_tree_size": "7", "log_root_hash": ROOT.hex()},
        {"log_tree_size": True, "log_root_hash": ROOT.hex()},
        {"log_tree_size": -1, "log_root_hash": ROOT.hex()},
        {"log_tree_size": 7, "log_root_hash": ROOT.hex().upper()},
        {"log_tree_size": 7, "log_root_hash": "ab" * 31},
        {"log_tree_size": 7},
        {"log_root_hash": ROOT.hex()},
    ],
    ids=["size-text", "size-bool", "size-negative", "root-upper", "root-short", "no-root",
         "no-size"],
)  # fmt: skip
def test_malformed_log_claims_are_log_claims_invalid(log: dict[str, Any]) -> None:
    jws = receipt(**log)
    with pytest.raises(StatementInvalid) as refused:
        verify_logged(jws, PINNED)
    assert refused.value.reason == LOG_CLAIMS_INVALID
    with pytest.raises(StatementInvalid) as refused:
        head_of_receipt({"iss": ISSUER, "issued_at": ISSUED_AT, **log}, KEY.kid, jws)
    assert refused.value.reason == LOG_CLAIMS_INVALID


def test_either_statement_speaks_only_for_the_key_that_verified_it() -> None:
    """Signed by a key not pinned: untrusted_key; in another's name: issuer_mismatch;
    with a header naming another typ: malformed."""
    by_other = receipt(OTHER, **log_claims(7, ROOT))
    head_by_other = sign_head(7, ROOT, OTHER, identity_of(OTHER.verification_key())).jws
    for jws in (by_other, head_by_other):
        with pytest.raises(StatementInvalid) as refused:
            verify_logged(jws, PINNED)
        assert refused.value.reason == "untrusted_key"
    both = TrustedKeys([KEY.verification_key(), OTHER.verification_key()])
    claims = {"iss": ISSUER, "issued_at": ISSUED_AT, **log_claims(7, ROOT)}
    in_another_name = issue_receipt(claims, OTHER)
    with pytest.raises(StatementInvalid) as refused:
        verify_logged(in_another_name, both)
    assert refused.value.reason == "issuer_mismatch"
    assert unverified_header(in_another_name)["typ"] == "a2a-receipt+jwt"
    with pytest.raises(StatementInvalid) as refused:
        verify_logged("not.a.statement", PINNED)
    assert refused.value.reason == "malformed"
