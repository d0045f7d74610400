"""The answer is readable: an admitted artifact's content in the API's run view, served
whole as inert text, and printed by ``federation run show``, all from the run store's
kept text, hashed again on every read; a tampered copy is refused, not shown.

Against the console's real deployment: a hostile peer's admitted artifact carries
markup, a ``javascript:`` link, control characters, a right-to-left override and a long
tail (``tests.console.peer.ADMITTED_LINES``)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from hashlib import sha256
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.errors import FederationError
from coordinator.service.artifact_content import (
    VIEW_BYTES,
    Kept,
    shown,
    whole,
    whole_content,
    with_content,
)
from tests.console.conftest import TOKEN, Deployment, environment
from tests.console.peer import ADMITTED_LINES, LONG_TAIL


def federation(data: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment(data), **(env or {})},
    )


def admitted(deployment: Deployment) -> dict[str, Any]:
    document = deployment.http.get(f"/v1/runs/{deployment.admitted_run}").json()
    [artifact] = document["artifacts"]
    return dict(artifact)


def test_the_run_view_carries_an_admitted_artifacts_content(deployment: Deployment) -> None:
    artifact = admitted(deployment)
    assert artifact["decision"] == "admitted"
    assert (artifact["number"], artifact["untrusted"]) == (1, True)
    assert artifact["content_check"] == "verified" and artifact["content_cut"] is False
    [returned] = artifact["content"]
    [part] = returned["parts"]
    assert part["data"] == {"echo": ADMITTED_LINES, "tail": LONG_TAIL}
    # the refused one is shown as before, numbered and checked too
    refused = deployment.http.get(f"/v1/runs/{deployment.refused_run}").json()["artifacts"]
    assert refused[0]["decision"] == "rejected" and refused[0]["content_check"] == "verified"
    assert refused[0]["content"][0]["parts"][1]["text"].startswith("<script>")


def test_the_artifact_route_serves_the_exact_text_received(deployment: Deployment) -> None:
    """Plain text never sniffed, whose sha256 is the ledger's content hash; typed 404s."""
    run_id = deployment.admitted_run
    answer = deployment.http.get(f"/v1/runs/{run_id}/artifacts/1")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in answer.headers["content-security-policy"]
    assert answer.headers["content-disposition"].startswith("attachment;")
    assert "sha256:" + sha256(answer.content).hexdigest() == admitted(deployment)["content_hash"]
    events = deployment.http.get(f"/v1/audit/runs/{run_id}").json()["artifacts"]
    assert {"sha256:" + sha256(answer.content).hexdigest()} <= {
        event.get("content_hash") for event in events
    }
    for path, reason in (
        (f"/v1/runs/{run_id}/artifacts/2", "unknown_artifact"),
        (f"/v1/runs/{run_id}/artifacts/0", "unknown_artifact"),
        ("/v1/runs/run-000000000000/artifacts/1", "unknown_run"),
    ):
        missing = deployment.http.get(path)
        assert missing.status_code == 404, (path, missing.text)
        assert missing.json()["error"]["reason"] == reason
    anonymous = httpx.get(f"{deployment.url}/v1/runs/{run_id}/artifacts/1", timeout=30)
    assert anonymous.status_code == 401


@pytest.mark.parametrize("through", ["data directory", "server"])
def test_run_show_prints_the_content_marked_untrusted_and_escaped(
    deployment: Deployment, through: str
) -> None:
    """Cut to fit, nothing in it able to drive a terminal, and ``--artifact N`` whole."""
    run_id = deployment.admitted_run
    server = ["--server", deployment.url] if through == "server" else []
    env = {"FEDERATION_OPERATOR_TOKEN": TOKEN}
    done = federation(deployment.data, *server, "run", "show", run_id, env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "artifact 1 (admitted): UNTRUSTED content from the remote" in out
    assert "\\u202efdp.exe" in out and "\u202e" not in out and "\x1b" not in out
    assert "\x00" not in out and "\x07" not in out
    assert f"  | all of it: federation run show {run_id} --artifact 1" in out
    assert len(out) < len(LONG_TAIL)

    whole = federation(deployment.data, *server, "run", "show", run_id, "--artifact", "1", env=env)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.isascii()
    assert json.loads(whole.stdout) == admitted(deployment)["content"]

    wrong = federation(deployment.data, *server, "run", "show", run_id, "--artifact", "7", env=env)
    assert wrong.returncode != 0 and "unknown_artifact" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr


def test_a_tampered_artifact_is_refused_not_shown(deployment: Deployment, tmp_path: Path) -> None:
    """A copy of the data directory whose kept artifact was edited: the view says the hash
    no longer matches and shows none of it; the whole is refused with a typed reason."""
    copy = tmp_path / "data"
    shutil.copytree(deployment.data, copy, ignore=shutil.ignore_patterns("federation.db*"))
    source, target = (
        sqlite3.connect(deployment.data / "federation.db"),
        sqlite3.connect(copy / "federation.db"),
    )
    source.backup(target)
    source.close()
    changed = target.execute(
        "UPDATE artifacts SET content = replace(content, 'tail-', 'tall-') "
        "WHERE run_id = ? AND decision = 'admitted'",
        (deployment.admitted_run,),
    ).rowcount
    target.commit()
    target.close()
    assert changed == 1
    run_id = deployment.admitted_run
    viewed = federation(copy, "run", "show", run_id, "--json")
    assert viewed.returncode == 0, viewed.stderr
    [artifact] = json.loads(viewed.stdout)["artifacts"]
    assert artifact["content_check"] == "hash_mismatch" and artifact["content"] is None
    text = federation(copy, "run", "show", run_id)
    assert "not shown, it no longer hashes" in text.stdout and "tall-" not in text.stdout
    whole = federation(copy, "run", "show", run_id, "--artifact", "1")
    assert whole.returncode != 0 and "artifact_hash_mismatch" in whole.stderr
    assert "tall-" not in whole.stdout + whole.stderr


def test_shown_text_escapes_every_control_and_bidirectional_character() -> None:
    text = "a\x1b[2Jb\x00c\x7fd\x85e\u2028f\u202eg\u2066h\u200fi\tj\nk"
    lines = shown([{"artifactId": "x", "parts": [{"text": text}]}], 1_000).splitlines()
    assert lines == [
        "artifact x (-):",
        "  text: a\\x1b[2Jb\\x00c\\x7fd\\x85e\\u2028f\\u202eg\\u2066h\\u200fi\tj",
        "k",
    ]
    named = shown([{"artifactId": "x\ny", "name": "\u202en", "parts": []}], 1_000)
    assert named == "artifact x\\x0ay (\\u202en):"
    assert shown("z" * 50, 10) == '"' + "z" * 9 + "\n… (cut to fit)"  # not artifacts: JSON


def kept_row(branch: str, decision: str, text: str | None, digest: str | None = None) -> Kept:
    real = "sha256:" + sha256((text or "").encode()).hexdigest()
    return Kept(branch, decision, digest or real, text)


def test_each_artifact_is_matched_to_its_own_kept_row_and_checked() -> None:
    """By branch, decision and hash, each row once; a receipt's row is no artifact's."""
    small, long = (
        '[{"parts":[{"text":"hi"}]}]',
        json.dumps([{"parts": [{"text": "x" * VIEW_BYTES}]}]),
    )
    rows = [
        kept_row("h/1", "covered_by_receipt", small),
        kept_row("h/1", "admitted", small),
        kept_row("h/2", "admitted", long),
        kept_row("h/3", "admitted", small, digest="sha256:" + "0" * 64),
        kept_row("h/4", "rejected", small),
    ]
    document = {
        "run_id": "run-1",
        "artifacts": [
            {"branch": r.branch, "decision": r.decision, "content_hash": r.content_hash}
            for r in rows[1:]
        ]
        + [{"branch": "h/5", "decision": "admitted", "content_hash": "sha256:1"}],
    }
    document["artifacts"][3]["content"] = "as the document holds it"
    view = with_content(document, rows)["artifacts"]
    assert [a["number"] for a in view] == [1, 2, 3, 4, 5]
    assert [a["content_check"] for a in view] == [
        "verified", "verified", "hash_mismatch", "verified", "not_kept",
    ]  # fmt: skip
    assert view[0]["content"] == json.loads(small) and view[0]["content_cut"] is False
    assert view[1]["content"] is None and view[1]["content_cut"] is True
    assert view[2]["content"] is None
    assert view[3]["content"] == "as the document holds it"  # a refused one, as before
    assert whole(document, rows, 2) == long
    for number, reason in (
        (6, "unknown_artifact"),
        (5, "artifact_not_kept"),
        (3, "artifact_hash_mismatch"),
    ):
        with pytest.raises(FederationError) as refused:
            whole(document, rows, number)
        assert refused.value.reason == reason
    with pytest.raises(FederationError) as too_long:
        whole_content({**document, "artifacts": view}, 2)
    assert too_long.value.reason == "artifact_too_long"
