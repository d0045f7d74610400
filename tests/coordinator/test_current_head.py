"""The head each token carries: kept current from the new events, never a stale or
unchecked tree.

The compact range kept per process must give exactly the root ``audit verify``
computes over the whole ledger, after any number of appends; an appended event whose
bytes do not match its hash stops the signing (ledger_broken); the heads it signs are
kept, so ``audit verify`` checks them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from coordinator.audit.log.current_head import CurrentHead, current_head, refreshed
from coordinator.audit.log.signing import public_jwk, thumbprint
from coordinator.audit.log.tree_heads import TreeHeadStore
from coordinator.audit.log.verification import verify
from coordinator.errors import LedgerError
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate
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


# --- the event loop never waits on the head's read of the ledger ------------------------
#
# Another session holds the events table (PostgreSQL's LOCK TABLE), so a read-back of the
# events since the last head waits on it for as long as the test wants: the caller that
# may not wait (the event loop minting a token) must be shown the last head meanwhile, and
# the refresh the loop starts must leave the loop running.


def _locked(url: str) -> Any:
    """A connection of another session holding the events table until it rolls back."""
    locker = open_engine(url).raw_connection()
    locker.cursor().execute("LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE")
    return locker


def _until_a_read_waits(engine: Engine) -> None:
    """Returns once a session waits for a lock on the events table (at most 20 s)."""
    query = (
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'audit_events'::regclass"
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if connection.exec_driver_sql(query).scalar():
                return
        time.sleep(0.01)
    raise AssertionError("no read of the events table waited on the lock")


def test_a_caller_that_may_not_wait_is_shown_the_last_head_during_a_read_elsewhere(
    postgres_url: str,
) -> None:
    engine = open_engine(postgres_url)
    migrate(engine)
    ledger = filled(engine, 3)
    key = Ed25519PrivateKey.generate()
    current = CurrentHead(engine, min_interval=0)
    first = current.latest(key, "coordinator")
    ledger.append_many([event(100)])
    locker = _locked(postgres_url)
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            reading = pool.submit(current.latest, key, "coordinator")
            _until_a_read_waits(engine)
            shown = pool.submit(current.latest, key, "coordinator", wait=False)
            assert shown.result(timeout=10) == first
            assert not reading.done()
        finally:
            locker.rollback()
            locker.close()
        assert reading.result(timeout=30).tree_size == 4
    engine.dispose()


def test_the_refresh_the_loop_starts_leaves_the_loop_running(postgres_url: str) -> None:
    engine = open_engine(postgres_url)
    migrate(engine)
    ledger = filled(engine, 3)
    key = Ed25519PrivateKey.generate()
    current = current_head(engine)
    current.min_interval = 0
    current.latest(key, "coordinator")
    ledger.append_many([event(100), event(101)])

    async def refresh_while_locked() -> bool:
        locker = _locked(postgres_url)
        # a refresh that held the loop could never see the lock let go: let go anyway
        let_go = threading.Timer(15, locker.rollback)
        let_go.start()
        try:
            refresh = asyncio.create_task(refreshed(engine, key, "coordinator"))
            await asyncio.to_thread(_until_a_read_waits, engine)  # the loop went on meanwhile
            waiting = not refresh.done()
        finally:
            let_go.cancel()
            locker.rollback()
            locker.close()
        await asyncio.wait_for(refresh, timeout=30)
        return waiting

    assert asyncio.run(refresh_while_locked())
    assert current.latest(key, "coordinator", wait=False).tree_size == 5
    engine.dispose()
