"""`federation runs` / `GET /v1/runs`: summaries, filters, and pages that never shift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coordinator.errors import UsageError
from coordinator.service import run_list
from coordinator.service.run_list import RunQuery
from coordinator.storage.runs import RunStore
from coordinator.workspace import Workspace
from tests.runs import new_run


def document(run_id: str, state: str, **extra: Any) -> dict[str, Any]:
    live = state in ("ADMITTED", "DISPATCHED", "RUNNING")
    branch = {"branch": f"{run_id}-h/1", "target": "remote-risk", "state": state, "reason": "r"}
    return {
        "run_id": run_id,
        "kind": "delegation",
        "owner": "operator",
        "branches": [branch],
        "live_branches": [branch["branch"]] if live else [],
        "cancelled": False,
        **extra,
    }


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    from coordinator.storage.datadir import DataDir

    ws = Workspace(DataDir(tmp_path))
    states = ["ACCEPTED", "RUNNING", "REJECTED", "ACCEPTED", "DISPATCHED", "FAILED", "ACCEPTED"]
    runs = ws.run_store()
    for number, state in enumerate(states):
        run_id = f"run-{number:02d}"
        runs.save_run(run_id, "operator", "delegation", {}, document(run_id, state))
    return runs


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["run_id"] for row in rows]


def test_newest_first_with_summary_columns(store: RunStore) -> None:
    rows, cursor = run_list.page(store, RunQuery())
    assert ids(rows) == [f"run-{n:02d}" for n in range(6, -1, -1)] and cursor is None
    first = rows[0]
    assert first["state"] == "ACCEPTED" and first["targets"] == ["remote-risk"]
    assert first["reason"] == "r" and first["started_at"].endswith("Z")
    assert rows[2]["state"] == "live"


def test_pages_follow_each_other_without_overlap(store: RunStore) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        rows, cursor = run_list.page(store, RunQuery(limit=3, cursor=cursor))
        seen += ids(rows)
        if cursor is None:
            break
    assert seen == [f"run-{n:02d}" for n in range(6, -1, -1)]


def test_a_run_recorded_while_paging_does_not_shift_the_next_page(store: RunStore) -> None:
    _, cursor = run_list.page(store, RunQuery(limit=3))
    store.save_run("run-99", "operator", "delegation", {}, document("run-99", "ACCEPTED"))
    following, _ = run_list.page(store, RunQuery(limit=3, cursor=cursor))
    assert ids(following) == ["run-03", "run-02", "run-01"]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("live", ["run-04", "run-01"]),
        ("finished", ["run-06", "run-05", "run-03", "run-02", "run-00"]),
        ("accepted", ["run-06", "run-03", "run-00"]),
        ("REJECTED", ["run-02"]),
    ],
)
def test_state_filter_fills_pages(store: RunStore, state: str, expected: list[str]) -> None:
    rows, cursor = run_list.page(store, RunQuery(state=state, limit=2))
    assert ids(rows) == expected[:2]
    rest: list[str] = []
    while cursor is not None:
        more, cursor = run_list.page(store, RunQuery(state=state, limit=2, cursor=cursor))
        rest += ids(more)
    assert ids(rows) + rest == expected


def test_since_keeps_later_runs(store: RunStore) -> None:
    rows, _ = run_list.page(store, RunQuery())
    since = rows[2]["started_at"]
    later, _ = run_list.page(store, RunQuery(since=since))
    assert all(row["started_at"] >= since for row in later) and ids(later)[-1] in ids(rows[:3])


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (RunQuery(limit=0), "bad_limit"),
        (RunQuery(limit=501), "bad_limit"),
        (RunQuery(since="yesterday"), "bad_since"),
        (RunQuery(since="0001-01-01T00:00:00+01:00"), "bad_since"),
        (RunQuery(since="9999-12-31T23:59:59-01:00"), "bad_since"),
        (RunQuery(cursor="not*a*cursor"), "bad_cursor"),
        (RunQuery(cursor="WzFd"), "bad_cursor"),
    ],
)
def test_bad_queries_are_usage_errors(store: RunStore, query: RunQuery, reason: str) -> None:
    with pytest.raises(UsageError) as refused:
        run_list.page(store, query)
    assert refused.value.reason == reason


def test_a_started_run_is_listed_with_its_kind() -> None:
    run = new_run(kind="pilot")
    rows, _ = run_list.page(run.store, RunQuery(limit=500))
    assert {"run_id": run.run_id, "kind": "pilot", "state": "empty"}.items() <= next(
        row for row in rows if row["run_id"] == run.run_id
    ).items()
