"""Retried sends over real loopback HTTP: one idempotency key, one task, one claimed token.

Each test runs against the in-memory store and the SQLite store, on each member of
``tests/members.py`` (remote_risk and the terms member built on the kit).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.members import MEMBERS
from tests.remote_risk.conftest import binding_of
from tests.remote_risk.delegated import Caller, delegated_service, refusal_reason


@pytest.fixture(params=sorted(MEMBERS))
def member(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["memory", "sqlite"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, member: str
) -> Iterator[tuple[Caller, Any]]:
    changes = {"data_dir": tmp_path} if request.param == "sqlite" else {}
    with delegated_service(member=MEMBERS[member], **changes) as running:
        yield running


def test_retried_send_returns_the_same_task(service: tuple[Caller, Any]) -> None:
    """A second attempt with the same key and a new token answers the first task; the store
    holds one task."""
    caller, app = service
    first = caller.task_of(caller.send("run-1", "h-1", attempt=1))
    retried = caller.task_of(caller.send("run-1", "h-1", attempt=2))
    assert retried["id"] == first["id"]
    assert binding_of(retried) == {"handoffId": "h-1", "attempt": 1}
    assert retried["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(app.state.task_store) == 1


def test_retry_with_the_same_token_is_not_a_replay(service: tuple[Caller, Any]) -> None:
    """Resending the very same request (same token, same key) answers the task it created."""
    caller, app = service
    token = caller.token("h-1")
    first = caller.task_of(caller.send("run-1", "h-1", token=token))
    again = caller.task_of(caller.send("run-1", "h-1", token=token))
    assert again["id"] == first["id"]
    assert len(app.state.task_store) == 1


def test_a_different_key_creates_a_second_task(service: tuple[Caller, Any]) -> None:
    """Another handoff of the run has another key and gets a task of its own."""
    caller, app = service
    first = caller.task_of(caller.send("run-1", "h-1"))
    second = caller.task_of(caller.send("run-1", "h-2"))
    assert second["id"] != first["id"]
    assert len(app.state.task_store) == 2


def test_the_same_key_from_another_principal_is_independent(
    service: tuple[Caller, Any],
) -> None:
    """Keys are scoped by owner: another subject's send with the key opens its own task."""
    alice, app = service
    bob = Caller(alice.base_url, alice.audience, sub="bob", member=alice.member)
    mine = alice.task_of(alice.send("run-1", "h-1"))
    theirs = bob.task_of(bob.send("run-1", "h-1"))
    assert theirs["id"] != mine["id"]
    assert len(app.state.task_store) == 2


def test_a_replayed_token_for_a_new_key_is_refused(service: tuple[Caller, Any]) -> None:
    """A token that created a task cannot create another under a new key: 401 replayed_jti."""
    caller, app = service
    token = caller.token("h-1")
    caller.task_of(caller.send("run-1", "h-1", token=token))
    refused = caller.send("run-2", "h-1", token=token)
    assert refusal_reason(refused) == (401, "replayed_jti")
    assert len(app.state.task_store) == 1


def test_a_key_of_another_handoff_cannot_reach_its_task(service: tuple[Caller, Any]) -> None:
    """A key already used for one handoff does not name that task for another: a token
    sees only its own handoff's tasks, so the same key there is another task's."""
    caller, app = service
    first = caller.task_of(caller.send("run-1", "h-1"))
    second = caller.task_of(caller.send("run-1", "h-2", key="run-1:h-1"))
    assert second["id"] != first["id"]
    assert binding_of(second) == {"handoffId": "h-2", "attempt": 1}
    assert len(app.state.task_store) == 2
