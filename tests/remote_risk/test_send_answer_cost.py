"""What a blocking SendMessage costs around its answer, outside its storage, counted: the
receipt reads the task in one dump and encodes its key's protected header once per key,
its log entry's parameters are named once per count of entries, and the call's context
is built once.
Counts, never times: a regression shows as a number that grew."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_cards.transparency import statements
from contracts.wire import Artifact, Task, TaskStatus
from member_kit.audit import log_rows
from member_kit.server.jsonrpc import CallContext
from tests.remote_risk.delegated import Caller, delegated_service

SENDS = 3
_HANDOFFS = itertools.count(1)  # a fresh handoff for every send


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Caller, Any]]:
    with delegated_service(data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, caches, first entries
        yield caller, app


def _send(caller: Caller, count: int = SENDS) -> None:
    for _ in range(count):
        task = caller.task_of(caller.send("run-1", f"h-{next(_HANDOFFS)}"))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"


def _counted(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, label: Callable[..., str]
) -> list[str]:
    """Every call of ``owner.name`` from now on, each as ``label`` names it."""
    calls: list[str] = []
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(label(*args, **kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_a_receipt_reads_its_task_in_one_dump(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receipt's view of the task (its id, status and artifacts) is one dump of the
    task, not a dump of its status and another of each artifact."""
    caller, _ = service
    dumped = _counted(monkeypatch, BaseModel, "model_dump", lambda model, **_: type(model).__name__)
    _send(caller)
    read = [
        name for name in dumped if name in {Task.__name__, TaskStatus.__name__, Artifact.__name__}
    ]
    assert read == [Task.__name__] * SENDS


def test_a_receipt_header_is_encoded_once_per_key(service: tuple[Caller, Any]) -> None:
    """Every receipt signed by one key has the same protected header: it is encoded once,
    not once per receipt."""
    caller, _ = service
    before = statements.protected_header.cache_info()
    _send(caller)
    after = statements.protected_header.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + SENDS)


def test_a_receipt_entry_names_its_parameters_without_spelling_them(
    service: tuple[Caller, Any],
) -> None:
    """The insert of a receipt's entry (and the decisions taken along) names its
    parameters as every insert of that many entries did: spelled once per count."""
    caller, _ = service
    _send(caller)  # the counts of entries a send writes, seen once
    before = log_rows._parameter_names.cache_info()
    _send(caller)
    after = log_rows._parameter_names.cache_info()
    assert (after.misses, after.hits) == (before.misses, before.hits + SENDS)


def test_a_call_context_is_built_once_per_request(
    service: tuple[Caller, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The authorizer builds the caller's context; the request's id is set on it without
    building it again."""
    caller, _ = service
    built = _counted(monkeypatch, CallContext, "__init__", lambda context, **_: "built")
    _send(caller)
    assert built == ["built"] * SENDS
