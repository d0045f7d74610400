"""The guard SIGKILLed while sends are in flight, started again, keeps what it committed.

Real processes on loopback: the stock a2a-sdk agent of ``examples/sdk_member.py``
(``--stock``) and ``federation serve guard`` in front of it, with a data directory. A
thread sends to the guard without pause, each send under a handoff, an idempotency key
and a delegation token of its own; once some sends are answered (COMPLETED, with a
receipt) the guard is killed with SIGKILL while one is in flight, then started again on
the same data directory and port. Then a token used before the kill is still refused as
replayed, a send retried under the key of a send answered before the kill gets that
same task, a send the kill cut off completes when retried under its key, new sends
complete, and the decision log extends every receipt issued before the kill, with no
gap in it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, load_or_create
from agent_cards.transparency import merkle
from agent_cards.transparency.heads import Head, verify_head
from agent_cards.transparency.logged import verify_logged
from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from agent_cards.trusted import TrustedKeys
from member_kit.storage.engine import database_file
from tests.members import SDK
from tests.processes import wait_for
from tests.remote_risk.delegated import ISSUER, Caller, refusal_reason
from tests.servers import free_port
from tests.tokens import COORDINATOR_KEY

ROOT = Path(__file__).resolve().parents[2]
AUDIT_TOKEN = secrets.token_urlsafe(32)
RUN = "run-killed"
COMPLETED = "TASK_STATE_COMPLETED"
ANSWERED_BEFORE_THE_KILL = 5


class Served:
    """One server process on a fixed loopback port, its first stdout line checked."""

    def __init__(self, args: list[str], port: int, said: str, log: Path) -> None:
        self.args, self.port, self.log = args, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.said = f"{said} listening on {self.url}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        environ = {**os.environ, "PYTHONUNBUFFERED": "1", "GUARD_AUDIT_TOKEN": AUDIT_TOKEN}
        with self.log.open("a") as stderr:
            process = subprocess.Popen(
                self.args, stdout=subprocess.PIPE, stderr=stderr, text=True, env=environ, cwd=ROOT
            )
        self.process = process
        assert process.stdout is not None
        first_line = process.stdout.readline().strip()
        assert first_line == self.said, f"{first_line!r}; see {self.log.name}"

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, whatever was in memory is gone."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        self._end(signal.SIGTERM)

    def _end(self, how: signal.Signals) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(how)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


class PatientCaller(Caller):
    """A caller that waits as long as a busy machine may take to answer."""

    timeout = 120.0


@dataclass
class Sent:
    """One send of the sending thread: its handoff, key and token, and the guard's answer
    (None: the kill cut it off, or the guard was down)."""

    handoff_id: str
    key: str
    token: str
    answer: httpx.Response | None = None

    @property
    def task(self) -> dict[str, Any]:
        """The task answered (the send must have been answered with one)."""
        assert self.answer is not None and self.answer.status_code == 200, self.answer
        task: dict[str, Any] = self.answer.json()["result"]["task"]
        return task


@dataclass
class Sender:
    """Sends one new handoff after another, each under its own key and token."""

    caller: Caller
    sent: list[Sent] = field(default_factory=list)
    in_flight: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)

    def answered(self) -> list[Sent]:
        return [s for s in self.sent if s.answer is not None]

    def cut(self) -> list[Sent]:
        return [s for s in self.sent if s.answer is None]

    def run(self) -> None:
        """Send until told to stop, or until a send is cut off (by the kill)."""
        number = 0
        while not self.stopping.is_set():
            number += 1
            handoff_id = f"h-{number}"
            one = Sent(handoff_id, f"{RUN}:{handoff_id}", self.caller.token(handoff_id))
            self.in_flight = True
            try:
                one.answer = self.caller.send(RUN, handoff_id, token=one.token, key=one.key)
            except httpx.TransportError:
                return
            finally:
                self.in_flight = False
                self.sent.append(one)


@dataclass
class Restarted:
    """The guard after its restart, and what it answered before the kill."""

    caller: Caller
    keys: TrustedKeys
    answered: list[Sent]
    cut: list[Sent]  # at most one: the send the kill cut off
    head_before: Head
    database: Path


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restarted]:
    root = tmp_path_factory.mktemp("guard-killed")
    jwks = root / "coordinator-jwks.json"
    jwks.write_text(json.dumps(KeySet(active=COORDINATOR_KEY).public_jwks()))
    guard_dir = root / "guard"
    guard_key = load_or_create(guard_dir / "keys").active.verification_key()
    agent_port, guard_port = free_port(), free_port()
    agent_args = [sys.executable, str(ROOT / "examples" / "sdk_member.py"), "--stock"]
    agent = Served([*agent_args, str(agent_port)], agent_port, "agent", root / "agent.log")
    guard_args = [
        sys.executable, "-m", "coordinator", "serve", "guard",
        "--upstream", f"http://127.0.0.1:{agent_port}", "--skill-scope", f"{SDK.skill}={SDK.scope}",
        "--port", str(guard_port), "--data-dir", str(guard_dir),
        "--trust-issuer", f"{ISSUER}={jwks}",
    ]  # fmt: skip
    guard = Served(guard_args, guard_port, "guard", root / "guard.log")
    agent.start()
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{agent_port}"), 60, "the agent's card")
        guard.start()
        caller = PatientCaller(guard.url, identity_of(guard_key), member=SDK)
        keys = TrustedKeys([guard_key])
        sender, head_before = killed_while_sending(guard, caller, keys)
        guard.start()
        database = guard_dir / database_file("guard")
        yield Restarted(caller, keys, sender.answered(), sender.cut(), head_before, database)
    finally:
        guard.stop()
        agent.stop()


def killed_while_sending(guard: Served, caller: Caller, keys: TrustedKeys) -> tuple[Sender, Head]:
    """Sends answered, the head the guard signs then, and the guard SIGKILLed while the
    next send is in flight: the sends made, and that head."""
    sender = Sender(caller)
    sending = threading.Thread(target=sender.run, name="sender", daemon=True)
    sending.start()
    try:
        enough = ANSWERED_BEFORE_THE_KILL
        wait_for(lambda: len(sender.answered()) >= enough, 120, "sends answered")
        head = verify_head(audit(caller, "/audit/head")["tree_head"], keys)
        wait_for(lambda: sender.in_flight, 60, "a send in flight")
        guard.kill()
        sending.join(timeout=60)  # the send in flight is cut off, which ends the sending
    finally:
        sender.stopping.set()
        sending.join(timeout=60)
    return sender, head


def _answers(base_url: str) -> bool:
    try:
        return httpx.get(base_url + "/.well-known/agent-card.json", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def audit(caller: Caller, path: str, **params: Any) -> dict[str, Any]:
    """One of the guard's audit routes, as its operator reads it."""
    headers = {"Authorization": f"Bearer {AUDIT_TOKEN}"}
    answer = httpx.get(caller.base_url + path, params=params, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def receipt_of(task: dict[str, Any]) -> str:
    receipt: str = task["metadata"][RECEIPTS_EXTENSION_URI]["receipt"]
    return receipt


def test_sends_before_the_kill_completed_with_receipts(restarted: Restarted) -> None:
    assert len(restarted.answered) >= ANSWERED_BEFORE_THE_KILL
    for sent in restarted.answered:
        assert sent.task["status"]["state"] == COMPLETED
        verify_logged(receipt_of(sent.task), restarted.keys)


def test_a_token_used_before_the_kill_is_refused_as_replayed(restarted: Restarted) -> None:
    """Its claim survived the kill: sent again under another key, it is refused."""
    caller = restarted.caller
    for sent in restarted.answered:
        replayed = caller.send(RUN, sent.handoff_id, token=sent.token, key=f"{sent.key}:again")
        assert refusal_reason(replayed) == (401, "replayed_jti")


def test_a_send_retried_under_its_key_gets_the_task_answered_before_the_kill(
    restarted: Restarted,
) -> None:
    """As the coordinator retries a handoff: its key, a fresh token of the same handoff."""
    caller = restarted.caller
    for sent in restarted.answered:
        retried = caller.task_of(caller.send(RUN, sent.handoff_id, key=sent.key))  # fresh token
        assert retried["id"] == sent.task["id"]
        assert retried["status"]["state"] == COMPLETED


def test_a_send_cut_off_by_the_kill_completes_when_retried_under_its_key(
    restarted: Restarted,
) -> None:
    """Whether the guard kept the cut send's task or not, a retry completes one task, and
    a second retry gets that same task."""
    caller = restarted.caller
    assert len(restarted.cut) == 1  # the send in flight at the kill ended the sending
    for sent in restarted.cut:
        first = caller.task_of(caller.send(RUN, sent.handoff_id, key=sent.key))
        again = caller.task_of(caller.send(RUN, sent.handoff_id, key=sent.key))
        assert first["status"]["state"] == COMPLETED
        assert again["id"] == first["id"]


def test_a_new_send_completes_after_the_restart(restarted: Restarted) -> None:
    caller = restarted.caller
    task = caller.task_of(caller.send(RUN, "h-after-restart"))
    assert task["status"]["state"] == COMPLETED
    verify_logged(receipt_of(task), restarted.keys)


def test_the_log_extends_every_head_stated_before_the_kill(restarted: Restarted) -> None:
    """The head signed before the kill and each receipt's log claims: the log now is at
    least as large, and an RFC 9162 consistency proof from the audit routes shows it
    extends each of them."""
    stated = [restarted.head_before]
    stated += [verify_logged(receipt_of(s.task), restarted.keys) for s in restarted.answered]
    for head in stated:
        extended = audit(restarted.caller, "/audit/consistency", **{"from": head.tree_size})
        current = verify_head(extended["tree_head"], restarted.keys)
        proof = [bytes.fromhex(node) for node in extended["proof"]]
        assert current.tree_size >= head.tree_size
        assert merkle.verify_consistency(
            head.tree_size, current.tree_size, head.root, current.root, proof
        )


def test_the_entries_of_a_handoff_answered_before_the_kill_are_in_the_log(
    restarted: Restarted,
) -> None:
    """Its allowed decision and its receipt, each with an inclusion proof in a head
    signed after the restart."""
    for sent in restarted.answered:
        covered = audit(restarted.caller, f"/audit/handoffs/{sent.handoff_id}")
        head = verify_head(covered["tree_head"], restarted.keys)
        kinds = [json.loads(entry["canonical"])["kind"] for entry in covered["entries"]]
        assert "decision" in kinds and "receipt" in kinds, kinds
        for entry in covered["entries"]:
            leaf = merkle.leaf_hash(bytes.fromhex(entry["hash"]))
            proof = [bytes.fromhex(node) for node in entry["inclusion_proof"]]
            assert merkle.verify_inclusion(entry["seq"] - 1, head.tree_size, leaf, proof, head.root)


def test_the_log_has_no_gap_and_its_rows_make_the_head(restarted: Restarted) -> None:
    """The rows of the guard's database are numbered 1..n without a gap, and the Merkle
    root of the first rows is the head the audit routes sign now."""
    head = verify_head(audit(restarted.caller, "/audit/head")["tree_head"], restarted.keys)
    with sqlite3.connect(f"file:{restarted.database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT seq, hash FROM remote_risk_audit_log ORDER BY seq"
        ).fetchall()
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
    assert len(rows) >= head.tree_size
    tree = merkle.Tree(merkle.leaf_hash(bytes.fromhex(h)) for _, h in rows[: head.tree_size])
    assert tree.root() == head.root
