"""The revocation state and the holder-proof record in the database, on each backend.

What one process learnt (a revoked handoff, a push's jti, a watched grant, a proof's
jti) is known to the next one on the same database; a push is taken once even by two
processes; and rows past their time are purged, so the tables stay bounded by what is
still valid. A watched grant is kept in its token's used-token row (rr0011), and the
migration carries the grants a member watched before into those rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select, text

from agent_cards.keys import TrustedKeys
from contracts.grant import Grant
from coordinator.authority.revocation import push_token
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import current_revision, migrate
from member_kit.storage.schema import (
    holder_proofs,
    revocation_pushes,
    revoked_handoffs,
    used_tokens,
)
from member_kit.trust.denials import DelegationDenied
from member_kit.trust.revocation import RevocationRefused, Revocations
from member_kit.trust.sql_replay import (
    SQLProofReplayGuard,
    SQLReplayGuard,
    SQLRevocationStore,
)
from tests import tokens
from tests.tokens import COORDINATOR_KEY

ISSUER = "urn:a2a-federation:coordinator"
AUDIENCE = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:member"
START = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


@pytest.fixture
def engine(migrated_engine: Engine) -> Engine:
    return migrated_engine


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def member(engine: Engine, clock: Clock) -> Revocations:
    """One process of the member: its state loaded from the database."""
    issuers = {ISSUER: TrustedKeys([COORDINATOR_KEY.verification_key()])}
    store = SQLRevocationStore(engine)
    return Revocations(issuers, lambda _now: frozenset({AUDIENCE}), clock=clock, store=store)


def grant(handoff_id: str, jti: str, clock: Clock) -> Grant:
    claims = tokens.delegation_claims(
        now=int(clock.now.timestamp()),
        issuer=ISSUER,
        audience=AUDIENCE,
        scope="risk:interpret",
        handoff_id=handoff_id,
        jti=jti,
    )
    return Grant.model_validate(claims)


def push(handoffs: list[str], clock: Clock) -> str:
    now = int(clock.now.timestamp())
    return push_token(COORDINATOR_KEY, ISSUER, AUDIENCE, "run-1", handoffs, now)


def claimed(state: Revocations, taken: Grant, engine: Engine, clock: Clock) -> None:
    """What the verifier does for a token that creates a task: admit it, claim its jti,
    then keep it with the claim (in the task's transaction)."""
    state.admit(taken)
    assert SQLReplayGuard(engine, clock).claim_task_creation(taken.jti, taken.exp, issuer=ISSUER)
    state.keep(taken)


def rows(engine: Engine) -> dict[str, int]:
    tables = (revoked_handoffs, revocation_pushes, used_tokens, holder_proofs)
    with engine.connect() as connection:
        counted = {
            table.name.removeprefix("remote_risk_"): connection.execute(
                select(func.count()).select_from(table)
            ).scalar_one()
            for table in tables
        }
        watched = select(func.count()).where(used_tokens.c.watched_claims.is_not(None))
        counted["watched"] = connection.execute(watched).scalar_one()
    return counted


def test_the_next_process_knows_what_the_last_one_learnt(engine: Engine) -> None:
    clock = Clock()
    first = member(engine, clock)
    claimed(first, grant("h-watched", "jti-1", clock), engine, clock)
    token = push(["h-revoked"], clock)
    assert first.accept_push(token) == []
    second = member(engine, clock)
    with pytest.raises(DelegationDenied) as refused:
        second.admit(grant("h-revoked", "jti-2", clock))
    assert refused.value.reason.value == "token_revoked"
    with pytest.raises(RevocationRefused) as replayed:
        second.accept_push(token)
    assert replayed.value.reason.value == "revocation_replayed"
    [revoked] = second.accept_push(push(["h-watched"], clock))
    assert revoked.jti == "jti-1"  # a grant the first process watched


def test_a_push_is_taken_once_by_two_processes(engine: Engine) -> None:
    clock = Clock()
    here, there = member(engine, clock), member(engine, clock)
    token = push(["h-1"], clock)
    here.accept_push(token)
    with pytest.raises(RevocationRefused) as replayed:
        there.accept_push(token)  # not in its memory: the database decides
    assert replayed.value.reason.value == "revocation_replayed"


def test_rows_past_their_time_are_purged(engine: Engine) -> None:
    clock = Clock()
    state = member(engine, clock)
    claimed(state, grant("h-1", "jti-1", clock), engine, clock)
    claimed(state, grant("h-2", "jti-2", clock), engine, clock)
    state.accept_push(push(["h-1"], clock))
    proofs = SQLProofReplayGuard(engine)
    now = int(clock.now.timestamp())
    assert proofs.take("jkt-1", "proof-1", now + 90, now)
    assert not proofs.take("jkt-1", "proof-1", now + 90, now)
    assert rows(engine) == {
        "revoked_handoffs": 1,
        "revocation_pushes": 1,
        "used_tokens": 2,
        "holder_proofs": 1,
        "watched": 1,  # jti-2; jti-1 was revoked (its token stays used)
    }
    clock.now += timedelta(hours=1)  # every token, push and proof above has expired
    later = int(clock.now.timestamp())
    claimed(state, grant("h-3", "jti-3", clock), engine, clock)
    assert proofs.take("jkt-1", "proof-2", later + 90, later)
    assert rows(engine) == {
        "revoked_handoffs": 0,
        "revocation_pushes": 0,
        "used_tokens": 1,  # jti-3: the others expired with their grants
        "holder_proofs": 1,  # proof-2
        "watched": 1,  # jti-3
    }
    assert member(engine, clock).is_revoked(grant("h-1", "jti-4", clock)) is False


def test_the_migration_keeps_the_grants_watched_in_their_tokens_rows(database_url: str) -> None:
    """rr0011 on a database at rr0010: each watched grant is carried into its token's
    used-token row (one written if the token had none), and the next process watches it
    from there; the watched grants' table is gone."""
    clock = Clock()
    engine = open_engine(database_url)
    try:
        migrate(engine, "rr0010")
        watched = {"h-claimed": grant("h-claimed", "jti-1", clock)}
        watched["h-alone"] = grant("h-alone", "jti-2", clock)
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO remote_risk_used_tokens (issuer, jti, expires_at) "
                     "VALUES (:issuer, 'jti-1', :at)"),
                {"issuer": ISSUER, "at": watched["h-claimed"].exp + 30},
            )  # fmt: skip
            for taken in watched.values():
                connection.execute(
                    text("INSERT INTO remote_risk_watched_grants (jti, forget_at, claims) "
                         "VALUES (:jti, :at, :claims)"),
                    {"jti": taken.jti, "at": taken.exp + 30,
                     "claims": taken.model_dump_json(by_alias=True, exclude_none=True)},
                )  # fmt: skip
        migrate(engine, "rr0011")
        assert current_revision(engine) == "rr0011"
        assert rows(engine)["used_tokens"] == 2 and rows(engine)["watched"] == 2
        [revoked] = member(engine, clock).revoke(ISSUER, ["h-alone"])
        assert revoked.jti == "jti-2"  # watched by the next process, from its token's row
        with engine.connect() as connection:
            assert not engine.dialect.has_table(connection, "remote_risk_watched_grants")
    finally:
        engine.dispose()


def test_a_watched_grant_s_row_lives_as_long_as_the_longer_need(engine: Engine) -> None:
    """The claim and the watch share one row: kept until the later of the replay guard's
    expiry and the watch's, so neither rule is cut short by the other's leeway."""
    clock = Clock()
    taken = grant("h-1", "jti-1", clock)
    short = SQLReplayGuard(engine, clock, leeway=timedelta(seconds=5))
    assert short.claim_task_creation(taken.jti, taken.exp, issuer=ISSUER)
    state = member(engine, clock)  # watches until exp plus its leeway of 30 s
    state.admit(taken)
    state.keep(taken)
    with engine.connect() as connection:
        kept = select(used_tokens.c.expires_at, used_tokens.c.watched_claims)
        [(expires_at, claims)] = connection.execute(kept).all()
    assert expires_at == taken.exp + 30 and claims is not None
    clock.now = datetime.fromtimestamp(taken.exp + 20, UTC)  # past the claim's 5 s
    [revoked] = member(engine, clock).revoke(ISSUER, ["h-1"])
    assert revoked.jti == "jti-1"  # still watched by the next process
