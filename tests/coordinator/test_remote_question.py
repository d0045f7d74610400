"""A remote's question reaches the operator: INPUT_REQUIRED / AUTH_REQUIRED, shown untrusted.

Input ``{}`` to remote_risk stops its task in INPUT_REQUIRED with a needs_input Finding
naming what is missing. The handoff is closed (the remote task cancelled) and what the
remote asked is in the run's document, the ledger, ``delegate``, ``run show`` and their
``--json``, marked untrusted; ``delegate`` exits 4.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.wire import Task
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.cli.main import main
from coordinator.handoff.question import MAX_TEXT_CHARS, remote_question
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.datadir import DataDir
from coordinator.workspace import Workspace
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.coordinator.test_api import SKILL, deployed
from tests.servers import free_port, running

MISSING = ["brief", "policy_note"]


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A data directory with remote_risk (trusting its coordinator keys) registered."""
    for name in ("FEDERATION_SERVER", "FEDERATION_ISSUER", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    directory = DataDir(tmp_path / "data")
    keys = coordinator_keys(directory)
    port = free_port()
    settings = Settings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers={DEFAULT_ISSUER: keys.trusted_keys()},
    )
    app = create_app(settings)
    with running(app, port=port) as url:

        async def register() -> None:
            anchor = TrustAnchor(keys=app.state.signing_keys.trusted_keys())
            async with A2AClient() as client:
                await Registry(directory).register(client, url, anchor=anchor)

        asyncio.run(register())
        (tmp_path / "empty.json").write_text("{}")
        yield directory.root


def delegate_empty(data: Path, *extra: str) -> int:
    empty = data.parent / "empty.json"
    argv = ["--data-dir", str(data), "delegate", "--to", "remote-risk", "--skill", SKILL]
    return main([*argv, "--input", str(empty), *extra])


def test_input_required_shows_what_the_remote_asked(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert delegate_empty(data, "--json") == 4
    document = json.loads(capsys.readouterr().out)
    question = document["remote_question"]
    assert question["state"] == "TASK_STATE_INPUT_REQUIRED" and question["asks_for"] == "input"
    assert question["untrusted"] is True and question["truncated"] is False
    [finding] = question["data"]
    assert finding["status"] == "needs_input"
    assert finding["facts"]["missing_inputs"] == MISSING
    assert document["local_state"] == "CANCELLED"
    assert document["reason"] == "closed_input_required"
    [branch] = document["branches"]
    assert branch["remote_question"] == question

    assert delegate_empty(data) == 4
    text = capsys.readouterr().out
    assert "UNTRUSTED text from the remote" in text and "policy_note" in text

    run_id = document["run_id"]
    assert main(["--data-dir", str(data), "run", "show", run_id]) == 0
    shown = capsys.readouterr().out
    assert "the remote asked for input" in shown and "missing_inputs" in shown
    assert main(["--data-dir", str(data), "run", "show", run_id, "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["branches"][0]["remote_question"] == question
    events = Workspace(DataDir(data)).ledger().events(run_id)
    [asked] = [event for event in events if event.event_type == "remote.asked"]
    assert asked.data["content_hash"] == question["content_hash"]


def test_the_api_answers_the_question_too(tmp_path: Path) -> None:
    with deployed(DataDir(tmp_path / "data")) as d:
        assert d.register().status_code == 200
        answer = d.http.post(
            "/v1/delegations", json={"to": "remote-risk", "skill": SKILL, "input": {}}
        )
        assert answer.status_code == 200, answer.text
        question = answer.json()["remote_question"]
        assert question["untrusted"] is True
        assert question["data"][0]["facts"]["missing_inputs"] == MISSING
        run = d.http.get(f"/v1/runs/{answer.json()['run_id']}").json()
        assert run["branches"][0]["remote_question"] == question


def interrupted(state: str, parts: list[dict[str, object]]) -> Task:
    return Task.model_validate(
        {
            "id": "t1",
            "status": {
                "state": state,
                "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": parts},
            },
        }
    )


def test_auth_required_is_a_question_for_authorization_and_is_bounded() -> None:
    """AUTH_REQUIRED is shown the same way; an overlong text is cut and said to be."""
    long = "x" * (MAX_TEXT_CHARS + 10)
    question = remote_question(
        interrupted("TASK_STATE_AUTH_REQUIRED", [{"text": "sign in at"}, {"text": long}])
    )
    assert question is not None
    assert question["asks_for"] == "authorization" and question["untrusted"] is True
    assert question["truncated"] is True and len(question["text"]) == MAX_TEXT_CHARS
    assert question["size"] > MAX_TEXT_CHARS and question["content_hash"].startswith("sha256:")
    assert remote_question(interrupted("TASK_STATE_WORKING", [{"text": "busy"}])) is None
