"""The head each token carries: kept current from the new events, never a stale or
unchecked tree.

The compact range kept per process must give exactly the root ``audit verify``
computes over the whole ledger, after any number of appends; an appended event whose
bytes do not match its hash stops the signing (ledger_broken); the heads it signs are
kept, so ``audit verify`` checks them.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from coordinator.audit.log.current_head import CurrentHead
from coordinator.audit.log.signing import public_jwk, thumbprint
from coordinator.audit.log.tree_heads import TreeHeadStore
from coordinator.audit.log.verification import verify
from coordinator.errors import LedgerError
from tests.coordinator.test_ledger import event, filled, sql


def test_the_kept_range_gives_the_root_of_the_whole_ledger(engine: Engine) -> None:
    """Built cold from 6 events, then extended by 1, 5 and 20 more: each head's root is
    the one the full verification computes, and each head is kept."""
    ledger = filled(engine, 6)
    key = Ed25519PrivateKey.generate()
    current = CurrentHead(engine, min_interval=0)
    for more in (0, 1, 5, 20):
        ledger.append_many([event(100 + i) for i in range(more)])
        head = current.latest(key, "coordinator")
        report = verify(engine)
        assert (head.tree_size, head.root_hash) == (report.last_seq, report.root_hash)
    assert len(TreeHeadStore(engine).signed()) == 4
    assert verify(engine).ok


def test_within_the_interval_the_last_head_is_shown_again(engine: Engine) -> None:
    ledger = filled(engine, 3)
    current = CurrentHead(engine, min_interval=3600)
    key = Ed25519PrivateKey.generate()
    first = current.latest(key, "coordinator")
    ledger.append(event(50))
    assert current.latest(key, "coordinator") == first


@pytest.mark.parametrize("other", ["key", "issuer"])
def test_another_signer_within_the_interval_gets_its_own_head(engine: Engine, other: str) -> None:
    """The last head was shown to whoever asked within the interval: a token signed with
    another key (a rotation, another workspace key) carried a head its receiver could not
    verify with that token's keys, and was refused (log_head_invalid)."""
    filled(engine, 3)
    current = CurrentHead(engine, min_interval=3600)
    first_key, second_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    first = current.latest(first_key, "coordinator")
    key, issuer = (second_key, "coordinator") if other == "key" else (first_key, "other")
    head = current.latest(key, issuer)
    assert head != first and head.iss == issuer
    assert head.kid == thumbprint(public_jwk(key))
    assert current.latest(key, issuer) == head  # then shown again to its own signer


def test_a_new_event_that_does_not_match_its_bytes_is_not_vouched_for(engine: Engine) -> None:
    ledger = filled(engine, 3)
    current = CurrentHead(engine, min_interval=0)
    key = Ed25519PrivateKey.generate()
    current.latest(key, "coordinator")
    ledger.append(event(60))
    sql(
        engine,
        "UPDATE audit_events SET canonical = replace(canonical, 'run-a', 'run-b') WHERE seq = 4",
    )
    with pytest.raises(LedgerError) as refused:
        current.latest(key, "coordinator")
    assert refused.value.reason == "ledger_broken"
