"""``audit reconcile`` has three verdicts: agree, disagree, and not checked (issue 36).

It used to say DISAGREE when it had compared nothing: with no audit credential, for an
agent that keeps no receipts, when the remote answered 404 or was down. Each of those is
now ``not_checked`` with its reason per agent and exit code 5; ``disagree`` (exit 1) is
kept for a comparison made that failed, and names the fields that differ.

Real processes: remote_risk (with and without its audit routes), a stock a2a-sdk server
that keeps no receipts, and the coordinator's CLI for every reconcile.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.service.reconcile_verdict import field, handoff_verdict, run_verdict
from coordinator.storage.datadir import DataDir
from tests.coordinator.test_api import deployed
from tests.coordinator.test_reconcile_counterparty import one_run_to, set_credential
from tests.interop.test_coordinator_to_sdk_server import ECHO_SCHEMA, SDK_KEY, sdk_app
from tests.processes import federation, registered, wait_for
from tests.servers import free_port, running

TOKEN = "audit-operator-token-for-verdict-tests-0123"
NOT_CHECKED_EXIT = 5


def reconcile(data: DataDir, run_id: str, *flags: str) -> tuple[int, str, str]:
    process = federation(data.root, "audit", "reconcile", run_id, *flags)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def reconciled(data: DataDir, run_id: str) -> tuple[int, dict[str, Any]]:
    status, out, err = reconcile(data, run_id, "--json")
    assert out, err
    return status, json.loads(out)


def not_checked(document: dict[str, Any]) -> list[tuple[str, str]]:
    return [(entry["agent"], entry["reason"]) for entry in document["not_checked"]]


def test_no_credential_is_not_checked_not_a_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was asked of remote_risk: not checked (exit 5), the reason named, and the
    text never says DISAGREE. Once its credential is set the same run agrees (exit 0)."""
    monkeypatch.setenv("REMOTE_RISK_AUDIT_TOKEN", TOKEN)
    with registered(tmp_path) as (data, _):
        run_id = one_run_to(data, "remote-risk")
        status, document = reconciled(data, run_id)
        assert (status, document["verdict"], document["agree"]) == (
            NOT_CHECKED_EXIT, "not_checked", False
        )  # fmt: skip
        assert not_checked(document) == [("remote-risk", "audit_credential_missing")]
        (handoff,) = document["handoffs"]
        assert handoff["verdict"] == "not_checked"
        assert document["witnesses"][0]["verdict"] == "not_checked"
        status, text, _ = reconcile(data, run_id)
        assert status == NOT_CHECKED_EXIT
        assert "DISAGREE" not in text and f"run {run_id}: NOT CHECKED" in text
        assert "not checked: remote-risk: audit_credential_missing" in text

        set_credential(data, "remote-risk", TOKEN, tmp_path)
        status, document = reconciled(data, run_id)
        assert (status, document["verdict"], document["not_checked"]) == (0, "agree", [])
        status, text, _ = reconcile(data, run_id)
        assert status == 0 and f"run {run_id}: both sides agree" in text


def test_a_remote_answering_404_or_down_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """remote_risk serves no audit routes (no audit token: 404): not checked with
    ``remote_audit_not_found``; stopped: ``remote_unavailable``. Exit 5 both times."""
    monkeypatch.delenv("REMOTE_RISK_AUDIT_TOKEN", raising=False)
    with registered(tmp_path) as (data, process):
        run_id = one_run_to(data, "remote-risk")
        set_credential(data, "remote-risk", TOKEN, tmp_path)
        status, document = reconciled(data, run_id)
        assert (status, document["verdict"]) == (NOT_CHECKED_EXIT, "not_checked")
        assert not_checked(document) == [("remote-risk", "remote_audit_not_found")]

        process.stop()
        status, document = reconciled(data, run_id)
        assert (status, document["verdict"]) == (NOT_CHECKED_EXIT, "not_checked")
        assert not_checked(document) == [("remote-risk", "remote_unavailable")]


def test_an_agent_that_keeps_no_receipts_is_not_checked(tmp_path: Path) -> None:
    """A handoff to a stock SDK agent (no receipts extension) used to leave
    ``"handoffs": []`` and DISAGREE; it is listed, not checked, with its reason."""
    port = free_port()
    with running(sdk_app(f"http://127.0.0.1:{port}"), port=port) as base:
        (tmp_path / "key.json").write_text(json.dumps(SDK_KEY.public_jwk()))
        (tmp_path / "schema.json").write_text(json.dumps(ECHO_SCHEMA))
        (tmp_path / "input.json").write_text(json.dumps({"question": "ping"}))
        data = DataDir(tmp_path / "data")
        for args in (
            ("register", base, "--name", "echo", "--trust-key", str(tmp_path / "key.json"),
             "--return-schema", f"echo={tmp_path / 'schema.json'}"),
            ("delegate", "--to", "echo", "--skill", "echo", "--input",
             str(tmp_path / "input.json"), "--json"),
        ):  # fmt: skip
            done = federation(data.root, *args)
            out, err = done.communicate(timeout=60)
            assert done.returncode == 0, err
        run_id = json.loads(out)["run_id"]
        status, document = reconciled(data, run_id)
    assert (status, document["verdict"]) == (NOT_CHECKED_EXIT, "not_checked")
    assert not_checked(document) == [("echo", "agent_keeps_no_receipts")]
    assert [h["agent"] for h in document["handoffs"]] == ["echo"]


def test_a_run_with_no_handoff_is_not_checked(tmp_path: Path) -> None:
    with registered(tmp_path) as (data, _):
        run_id = one_run_to(data)
        status, document = reconciled(data, run_id)
    assert (status, document["verdict"], document["reason"]) == (
        NOT_CHECKED_EXIT, "not_checked", "no_handoffs"
    )  # fmt: skip


def test_disagree_names_the_fields_that_differ_and_outweighs_not_checked() -> None:
    fields = {
        "jti": field("jti-1", "jti-1"),
        "state": field("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"),
        "artifact_digest": field(None, None),
    }
    judged = handoff_verdict(fields, proven=True)
    assert (judged["verdict"], judged["differing"]) == ("disagree", ["state"])
    assert handoff_verdict({"jti": field("j", "j")}, proven=False)["verdict"] == "disagree"
    assert handoff_verdict({"jti": field(None, None)}, proven=True)["verdict"] == "not_checked"
    assert handoff_verdict({"jti": field("j", "j")}, proven=True)["verdict"] == "agree"
    running = handoff_verdict({"jti": field("j", "j")}, proven=True, receipted=False)
    assert (running["verdict"], running["reason"]) == ("not_checked", "no_receipt_yet")
    forged = handoff_verdict({"jti": field("j", "k")}, proven=True, receipted=False)
    assert forged["verdict"] == "disagree"
    agree, skipped = {"verdict": "agree"}, {"verdict": "not_checked"}
    assert run_verdict([agree, skipped, judged], []) == "disagree"
    assert run_verdict([agree, skipped], []) == "not_checked"
    assert run_verdict([agree], [agree]) == "agree"
    assert run_verdict([], []) == "not_checked"


def test_the_exit_codes_of_the_verdicts_are_the_clis_table() -> None:
    from coordinator.cli.audit_commands import RECONCILE_EXIT_CODES
    from coordinator.cli.main import EXIT_CODES

    assert set(RECONCILE_EXIT_CODES.values()) <= set(EXIT_CODES)
    assert "reconcile" in EXIT_CODES[NOT_CHECKED_EXIT]


class HeldSends:
    """remote_risk behind a gate: its A2A requests wait until :attr:`release` is set (a
    message still on its way); its audit routes answer at once."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.release = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            await asyncio.to_thread(self.release.wait, 60)
        await self.app(scope, receive, send)


def test_a_handoff_still_running_is_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reconciled (through the API) while the message is still on its way (the token
    minted, nothing recorded by remote_risk yet), then while remote_risk works on the task:
    no receipt on either side, so not checked (``no_receipt_yet``) both times, not a
    disagreement on facts only one side could state yet. Once the task has ended, the
    same run agrees. Before, the first reconcile read the remote's silence as a
    disagreement on the token."""
    for name in ("FEDERATION_SERVER", "FEDERATION_OPERATOR_TOKEN", "FEDERATION_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    gates: list[HeldSends] = []

    def held(app: Any) -> HeldSends:
        gates.append(HeldSends(app))
        return gates[-1]

    data = DataDir(tmp_path / "data")
    with deployed(data, skill_delay_seconds=4, audit_token=TOKEN, wrap_risk=held) as api:
        gates[0].release.set()  # registration and the credential pass
        assert api.register().status_code == 200
        path = "/v1/agents/remote-risk/audit-credential"
        assert api.http.put(path, json={"token": TOKEN}).status_code == 200
        gates[0].release.clear()
        run_id = api.delegate(wait=False).json()["run_id"]
        reconcile_path = f"/v1/audit/runs/{run_id}/reconcile"
        seen: list[dict[str, Any]] = []

        def minted() -> bool:
            seen.append(api.http.post(reconcile_path).json())
            return any(h["fields"].get("jti", {}).get("coordinator") for h in seen[-1]["handoffs"])

        wait_for(minted, 30, "the token minted")
        on_its_way = seen[-1]
        gates[0].release.set()

        def arrived() -> bool:
            seen.append(api.http.post(reconcile_path).json())
            return any(h["fields"].get("jti", {}).get("remote") for h in seen[-1]["handoffs"])

        wait_for(arrived, 30, "the token recorded by remote_risk")
        for document in (on_its_way, seen[-1]):
            assert (document["verdict"], not_checked(document)) == (
                "not_checked", [("remote-risk", "no_receipt_yet")]
            ), document  # fmt: skip

        def ended() -> bool:
            return not api.http.get(f"/v1/runs/{run_id}").json().get("live_branches")

        wait_for(ended, 30, "the handoff to end")
        assert api.http.post(reconcile_path).json()["verdict"] == "agree"
