"""Refusals of strangers cost nothing permanent; decisions about authenticated parties do.

Before, every request remote_risk refused was appended to its decision log, a Merkle log
nothing may ever prune: an outside test grew it by 900 entries (about 333 bytes each)
with 900 requests carrying no token at all. Against a real token-checking service on
loopback, with its log in SQLite, requests whose token no known issuer's key verified
(none, malformed, a bad signature, an unknown issuer or kid, a garbage body) are refused
on every binding, counted by reason and logged at a bounded rate, and the log does not
grow; a token that did verify and is refused (audience, scope, replay) stays a decision
about an authenticated party, entered in the log with its ``jti``. Held against each
member of ``tests/members.py`` (remote_risk and the terms member built on the kit), on
every binding its card lists.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards import tls
from agent_cards.keys import b64url_decode
from agent_cards.transparency.entries import decision_in
from member_kit.storage.schema import audit_log
from tests import tokens
from tests.members import MEMBERS
from tests.remote_risk.delegated import ISSUER, Caller, delegated_service
from tests.remote_risk.test_bindings_same_checks import (
    BINDINGS,
    Interfaces,
    message,
    served_interfaces,
)
from tests.servers import free_port

HANDOFF = "h-same"  # the handoff the bindings' shared message names
ROUNDS = 4
# The kit's metric, under each member's own prefix (remote_risk_..., legal_terms_...).
UNAUTHENTICATED = "unauthenticated_refusals_total"
DECISIONS_LOGGER = "member_kit.server.auth"


@pytest.fixture(scope="module", params=sorted(MEMBERS))
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Caller, Interfaces, Any]]:
    """Each member in turn, its decision log in SQLite, gRPC on a port of its own."""
    data_dir: Path = tmp_path_factory.mktemp(request.param)
    member = MEMBERS[request.param]
    with delegated_service(member=member, grpc_port=free_port(), data_dir=data_dir) as served:
        caller, app = served
        yield caller, served_interfaces(caller.base_url), app


def claims(caller: Caller, **changes: Any) -> dict[str, Any]:
    base = tokens.delegation_claims(
        now=int(time.time()),
        issuer=ISSUER,
        audience=caller.audience,
        scope=caller.member.scope,
        handoff_id=HANDOFF,
        jti=f"jti-{time.monotonic_ns()}",
    )
    return tokens.changed(base, **changes)


Token = Callable[[Caller], str | None]
STRANGERS: dict[str, Token] = {
    "token_missing": lambda c: None,
    "token_malformed": lambda c: "not.a-token.at-all!",
    "signature_invalid": lambda c: tokens.alter_signature(c.token(HANDOFF)),
    "issuer_unknown": lambda c: tokens.forge(tokens.header(), claims(c, iss="urn:stranger")),
    "kid_unknown": lambda c: tokens.forge(tokens.header(tokens.ATTACKER_KEY), claims(c)),
}
AUTHENTICATED: dict[str, Token] = {
    "audience_mismatch": lambda c: tokens.forge(
        tokens.header(), claims(c, aud=c.audience + "/other")
    ),
    "scope_insufficient": lambda c: tokens.forge(
        tokens.header(), claims(c, scope=c.member.narrow_scope)
    ),
}


def log_size(app: Any) -> int:
    app.state.audit_log.flush()
    size, _root = app.state.audit_log.current()
    return int(size)


def counted(app: Any, reason: str) -> float:
    """The app's own count of strangers refused for ``reason`` (its own registry)."""
    telemetry = app.state.telemetry
    name = telemetry.names.metrics_prefix + UNAUTHENTICATED
    return telemetry.metrics.registry.get_sample_value(name, {"reason": reason}) or 0.0


def garbage_without_token(caller: Caller) -> int:
    response = httpx.post(
        caller.base_url + "/a2a/jsonrpc",
        content=b"{\x00 not json",
        headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
        verify=tls.verified(),
        timeout=10,
    )
    return response.status_code


def test_refusals_of_strangers_add_nothing_to_the_decision_log(
    service: tuple[Caller, Interfaces, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Five kinds of stranger, four rounds on each of the three bindings, plus garbage
    bodies: each refused with its reason, each counted, at most a burst of log lines per
    reason, and not one entry in the decision log (nor its in-memory view)."""
    caller, listed, app = service
    assert set(listed) == set(BINDINGS)
    size, recent = log_size(app), len(app.state.decisions)
    before = {reason: counted(app, reason) for reason in STRANGERS}
    with caplog.at_level(logging.WARNING, logger=DECISIONS_LOGGER):
        for _ in range(ROUNDS):
            for reason, token in STRANGERS.items():
                for binding, url in listed.items():
                    assert BINDINGS[binding](url, message(caller), token(caller))[1] == reason
            assert garbage_without_token(caller) == 401
    assert log_size(app) == size
    assert len(app.state.decisions) == recent
    per_binding = ROUNDS * len(BINDINGS)
    for reason in STRANGERS:
        extra = ROUNDS if reason == "token_missing" else 0
        assert counted(app, reason) - before[reason] == per_binding + extra, reason
        lines = [r for r in caplog.records if f"reason={reason} " in r.getMessage()]
        assert 1 <= len(lines) < per_binding, (reason, len(lines))


def test_a_verified_token_refused_is_a_logged_decision(
    service: tuple[Caller, Interfaces, Any],
) -> None:
    """A token whose signature verified with the known issuer's key names an
    authenticated party: its refusal (audience, scope, a replayed jti) is entered in the
    decision log with the token's jti and claims digest, and is not counted as a stranger's."""
    caller, listed, app = service
    for reason, make in AUTHENTICATED.items():
        token = make(caller)
        assert token is not None
        size, strangers = log_size(app), counted(app, reason)
        assert BINDINGS["JSONRPC"](listed["JSONRPC"], message(caller), token)[1] == reason
        (entry,) = decisions_after(app, size)
        assert (entry["allowed"], entry["reason"]) == (False, reason)
        assert entry["jti"] == json.loads(b64url_decode(token.split(".")[1]))["jti"]
        assert counted(app, reason) == strangers
    token = caller.token("h-replayed")
    assert caller.send("run-1", "h-replayed", token=token).status_code == 200
    size = log_size(app)
    assert caller.send("run-1", "h-replayed", token=token, key="other").status_code == 401
    # the call is allowed, then the task's creation refused: both are decisions about it
    assert [e["reason"] for e in decisions_after(app, size)][-1] == "replayed_jti"


def decisions_after(app: Any, size: int) -> list[dict[str, Any]]:
    """The decisions entered after the first ``size`` entries: each decision entry's data,
    or the decision riding on a receipt's entry."""
    log_size(app)
    with app.state.durable_store.engine.connect() as connection:
        query = audit_log.select().where(audit_log.c.seq > size).order_by(audit_log.c.seq)
        records = [json.loads(row["canonical"]) for row in connection.execute(query).mappings()]
    return [dict(found) for found in map(decision_in, records) if found is not None]
