"""A blocking SendMessage takes the fast path (member_kit.server.limits.FastSend); every other
JSON-RPC request, a streaming or non-blocking send included, takes the general stack.
Both answer alike: the same checks and errors (the token-attack and protocol suites run
over the fast path too), here a refusal and a parse error on either side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import event

from contracts import strict_json
from member_kit.server.limits import FAST, GENERAL
from tests.remote_risk.delegated import delegated_service, refusal_reason


def _paths(app: object) -> dict[str, int]:
    counts = app.state.send_paths  # type: ignore[attr-defined]
    return {FAST: counts[FAST], GENERAL: counts[GENERAL]}


def test_a_blocking_send_takes_the_fast_path() -> None:
    with delegated_service() as (caller, app):
        task = caller.task_of(caller.send("run-1", "h-1"))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        explicit = caller.send("run-1", "h-2", configuration={"returnImmediately": False})
        assert caller.task_of(explicit)["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _paths(app) == {FAST: 2, GENERAL: 0}


def test_a_non_blocking_send_and_other_methods_take_the_general_path() -> None:
    with delegated_service() as (caller, app):
        answer = caller.send("run-1", "h-1", configuration={"returnImmediately": True})
        task = caller.task_of(answer)
        assert caller.get_task(task["id"], "h-1").status_code == 200
        assert _paths(app) == {FAST: 0, GENERAL: 2}


def test_a_streaming_send_takes_the_general_path() -> None:
    with delegated_service() as (caller, app):
        token = caller.token("h-1")
        sent = caller.send("run-1", "h-1", token=token)  # a message to stream like it
        params = json.loads(sent.request.content)["params"]
        params["message"]["messageId"] = "m-streamed"
        params["message"]["metadata"]["handoffId"] = "h-3"
        body = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": params}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {caller.token('h-3')}"}
        url = caller.base_url + "/a2a/jsonrpc"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=10) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in streamed.iter_lines() if line.startswith("data:")]
        assert lines
        assert _paths(app) == {FAST: 1, GENERAL: 1}


def test_a_refused_token_is_answered_before_either_path() -> None:
    with delegated_service() as (caller, app):
        refused = caller.send("run-1", "h-1", token="not-a-token")
        assert refusal_reason(refused) == (401, "token_malformed")
        assert _paths(app) == {FAST: 0, GENERAL: 0}


def test_a_send_the_endpoint_refuses_is_answered_alike_on_the_general_path() -> None:
    with delegated_service() as (caller, app):
        headers = {
            "A2A-Version": "1.0",
            "Content-Type": "text/plain",
            "Authorization": f"Bearer {caller.token('h-1')}",
        }
        body = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}'
        answer = httpx.post(caller.base_url + "/a2a/jsonrpc", content=body, headers=headers)
        assert answer.status_code == 200
        assert answer.json()["error"]["code"] == -32005
        assert _paths(app) == {FAST: 0, GENERAL: 1}


def test_a_blocking_send_takes_one_transaction(tmp_path: Path) -> None:
    """On SQLite a blocking send makes one durable write: its task (inserted once, in its
    final state, never updated), the token's claim, the outcome, the allowed decision and
    the receipt with its head commit together, the decision riding on the receipt's one
    log entry; the task counted in the store's counter, the table never counted."""
    with delegated_service(data_dir=tmp_path) as (caller, app):
        caller.task_of(caller.send("run-1", "h-0"))  # warm: keys, caches, first entries
        app.state.audit_log.flush()
        statements = _traced(app.state.durable_store.engine)
        entries = app.state.audit_log.current()[0]
        task = caller.task_of(caller.send("run-1", "h-1"))
        app.state.audit_log.flush()
        writes = [t for t in _transactions(statements) if any(_writes(s) for s in t)]
        (only,) = writes
        of_tasks = [s for s in only if _writes(s) and " remote_risk_tasks " in s]
        assert [s.split()[0] for s in of_tasks] == ["INSERT"]
        assert task["id"] in of_tasks[0] and "TASK_STATE_COMPLETED" in of_tasks[0]
        inserted = [s for s in only if s.startswith("INSERT INTO remote_risk_audit_log")]
        assert len(inserted) == 1  # one entry: the receipt, the decision riding on it
        assert '"kind":"receipt"' in inserted[0] and '"allowed":true' in inserted[0]
        assert app.state.audit_log.current()[0] == entries + 1
        counters = [s for s in only if s.startswith("UPDATE remote_risk_counters")]
        assert len(counters) == 2  # the task counted in, the status sequence bumped once
        assert sum("'task_count'" in s for s in counters) == 1
        assert not [s for s in only if "count(*)" in s.lower()]  # the table is not counted
        stored = caller.get_task(task["id"], "h-1").json()["result"]
        assert stored["status"] == task["status"] and stored["artifacts"] == task["artifacts"]


def _writes(statement: str) -> bool:
    return statement.startswith(("INSERT", "UPDATE", "DELETE"))


def _traced(engine: Any) -> list[tuple[int, str]]:
    """Every statement of ``engine``'s connections from now on, with its connection."""
    statements: list[tuple[int, str]] = []
    engine.dispose()

    def connected(connection: Any, _: Any) -> None:
        def trace(statement: str) -> None:
            statements.append((id(connection), statement))

        connection.set_trace_callback(trace)

    event.listen(engine, "connect", connected)
    return statements


def _transactions(statements: list[tuple[int, str]]) -> list[list[str]]:
    """The statements grouped by transaction (BEGIN to COMMIT on one connection)."""
    open_: dict[int, list[str]] = {}
    done: list[list[str]] = []
    for connection, statement in statements:
        if statement.startswith("BEGIN"):
            open_[connection] = []
        elif statement == "COMMIT" and connection in open_:
            done.append(open_.pop(connection))
        elif connection in open_:
            open_[connection].append(statement)
    return done


def _spelled(caller: Any, handoff_id: str, dumps: Any) -> httpx.Response:
    """A blocking send whose body ``dumps`` spells."""
    params = json.loads(caller.send("run-1", "h-0").request.content)["params"]
    params["message"]["messageId"] = f"m-{handoff_id}"
    params["message"]["metadata"]["handoffId"] = handoff_id
    body = dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
    headers = {
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {caller.token(handoff_id)}",
    }
    return httpx.post(caller.base_url + "/a2a/jsonrpc", content=body, headers=headers)


def test_a_body_the_edge_read_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge's body check reads a body in orjson's own spelling; the fast path takes
    that document instead of parsing the same bytes again. A body spelled otherwise is
    parsed where it was before."""
    read: list[bytes] = []
    parse = strict_json.loads

    def counted(data: bytes | str) -> Any:
        read.append(data if isinstance(data, bytes) else data.encode())
        return parse(data)

    with delegated_service() as (caller, app):
        monkeypatch.setattr(strict_json, "loads", counted)
        compact = _spelled(caller, "h-1", orjson.dumps)
        assert caller.task_of(compact)["status"]["state"] == "TASK_STATE_COMPLETED"
        assert compact.request.content not in read
        spaced = _spelled(caller, "h-2", lambda value: json.dumps(value).encode())
        assert caller.task_of(spaced)["status"]["state"] == "TASK_STATE_COMPLETED"
        assert read.count(spaced.request.content) == 1
        assert _paths(app) == {FAST: 4, GENERAL: 0}
