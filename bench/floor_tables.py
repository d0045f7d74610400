"""The floor on the member's own tables: two rungs between the floor and remote_risk.

:mod:`bench.floor` makes remote_risk's checks of a blocking send once each, but keeps
three tables of its own. These floors make the same checks (they are that floor, its
token and message checks inherited) and then do what remote_risk's store does with a
send, in remote_risk's migrated schema: one transaction of the same eight statements (the
idempotency key looked up, the task counted in the store's counter, the token's
``jti`` claimed and its grant watched, the decision and the receipt entered in the
decision log, the status sequence bumped, the task inserted with its history, artifacts,
metadata and its key's expiry), then one
receipt in the member's format (:func:`~agent_cards.transparency.receipts.issue_receipt`)
stating the log's size and root, and the task as remote_risk answers it.

- :class:`TablesFloor` (``python -m bench.floor_tables``) builds the rows and the answer
  as plain dicts, encoded by orjson;
- :class:`ModelsFloor` (``--models``) holds them as remote_risk does: the request parsed
  into the wire models (pydantic), the task kept as a
  :class:`~member_kit.tasks.record.TaskRecord`, its row dumped by the store's own
  :func:`~member_kit.tasks.sql_rows.row_values`, the answer by the endpoint's
  :func:`~member_kit.server.jsonrpc.result_body`.

So the ladder floor -> tables -> models -> remote_risk splits what a send costs beyond
its checks into the member's data model, its representation, and the rest (how the
general path is put together, and the checks the floors leave out: revocation, tree
heads, holder proofs, request digests, spans and metrics). ``python -m bench.remote_cpu
--floor`` runs every rung in the same rounds. Yardsticks, not members: refusals are bare
status codes, and nothing else of a member is served.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from agent_cards.transparency import merkle
from agent_cards.transparency.logged import log_claims
from agent_cards.transparency.receipts import (
    RECEIPT_KEY,
    RECEIPTS_EXTENSION_URI,
    Bound,
    issue_receipt,
    receipt_claims,
)
from bench.floor import Floor, Refused, main
from contracts.canonical import canonical_json
from contracts.wire import SendMessageRequest, SendMessageResponse, TaskState, to_wire
from member_kit.server.jsonrpc import result_body
from member_kit.server.messages import outcome_artifact, skill_input_of
from member_kit.skill import run_now
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from member_kit.tasks.record import TaskRecord, move, task_owner
from member_kit.tasks.sql_rows import row_values
from remote_risk.risk import skill
from remote_risk.service import risk_member

MEMBER = "floor-tables"
KEY_RETENTION_MS = 24 * 3600 * 1000
LEASE_MS = 30_000
LEEWAY = 30
_RISK_SKILL = risk_member().skill
_FIND_KEY = (
    "SELECT task_id, expires_at_ms, retained_task, 1 FROM remote_risk_idempotency_keys"
    " WHERE owner = ? AND idempotency_key = ? UNION ALL SELECT id, key_expires_at_ms, NULL, 0"
    " FROM remote_risk_tasks WHERE owner = ? AND idempotency_key = ?"
)
_RESERVE = (
    "UPDATE remote_risk_counters SET value = value + 1 WHERE name = 'task_count' RETURNING value"
)
_CLAIM = (
    "INSERT INTO remote_risk_used_tokens (issuer, jti, expires_at) VALUES (?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)
_WATCH = (
    "INSERT INTO remote_risk_used_tokens (issuer, jti, expires_at, watched_claims)"
    " VALUES (?, ?, ?, ?) ON CONFLICT (issuer, jti) DO UPDATE SET"
    " watched_claims = excluded.watched_claims"
)
_LAST_SEQ = "SELECT max(seq) FROM remote_risk_audit_log"
_ENTER = (
    "INSERT INTO remote_risk_audit_log (seq, hash, canonical, entry_key, handoff_id)"
    " VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?) ON CONFLICT (entry_key) DO NOTHING"
)
_BUMP = (
    "UPDATE remote_risk_counters SET value = value + 3 WHERE name = 'task_sequence' RETURNING value"
)
_INSERT_TASK = (
    "INSERT INTO remote_risk_tasks (id, owner, context_id, state, changed_at_ms, sequence,"
    " status_message, history, artifacts, task_metadata, idempotency_key, key_expires_at_ms,"
    " worker, lease_until_ms) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)"
)


# A log entry's row: seq, hash, canonical text, key and handoff.
Entry = tuple[int, str, str, str, str]


@dataclass
class Opened:
    """A send's task as one floor holds it: what its row and its receipt need."""

    id: str
    context_id: str
    changed_at: datetime
    history: str
    artifacts: str
    metadata: str
    wire: dict[str, Any]  # id, status and artifacts as the wire has them, for the receipt
    held: Any  # what the answer is built from


class TablesFloor(Floor):
    """The floor, writing remote_risk's rows and answering its task, as plain dicts."""

    def open_database(self, data_dir: Path) -> sqlite3.Connection:
        engine = open_engine(data_dir=data_dir, member=MEMBER)
        migrate(engine)
        engine.dispose()
        db = sqlite3.connect(data_dir / f"{MEMBER}.db", isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "temp_store=MEMORY"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("INSERT OR IGNORE INTO remote_risk_counters VALUES ('task_sequence', 0)")
        return db

    def leaves(self) -> Iterator[bytes]:
        for (digest,) in self.db.execute("SELECT hash FROM remote_risk_audit_log ORDER BY seq"):
            yield merkle.leaf_hash(bytes.fromhex(digest))

    def send(self, body: bytes, authorization: bytes | None) -> bytes:
        claims = self.claims(authorization)
        request_id, data, message = self.message(body, claims)
        handoff = claims["handoff"]
        owner = task_owner(claims["iss"], claims["sub"], claims.get("tenant", ""), handoff["id"])
        bound = Bound(handoff["id"], handoff["attempt"], claims["jti"], claims.get("req_digest"))
        opened = self.open(message, data, bound, claims["aud"])
        receipt = receipt_claims(opened.wire, bound, self.identity)
        entries = self.entries(claims, owner, receipt)
        self.store(claims, owner, opened, entries)
        for _, digest, _, _, _ in entries:
            self.log.add(merkle.leaf_hash(bytes.fromhex(digest)))
        receipt.update(log_claims(self.log.size, self.log.root()))
        return self.answer(request_id, opened, issue_receipt(receipt, self.key))

    def open(
        self, message: dict[str, Any], data: dict[str, Any], bound: Bound, audience: str
    ) -> Opened:
        """The task the send opens, worked at once, COMPLETED with its finding."""
        task_id, context_id, now = str(uuid.uuid4()), str(uuid.uuid4()), datetime.now(UTC)
        finding = to_wire(skill.interpret_risk_policy(data))
        artifact = {
            "artifactId": str(uuid.uuid4()),
            "name": _RISK_SKILL.artifact_name,
            "description": _RISK_SKILL.artifact_description,
            "parts": [{"data": finding, "mediaType": "application/json"}],
        }
        status = {"state": TaskState.COMPLETED.value, "timestamp": _timestamp(now)}
        task = {
            "id": task_id,
            "contextId": context_id,
            "status": status,
            "artifacts": [artifact],
            "history": [{**message, "taskId": task_id, "contextId": context_id}],
            "metadata": _metadata(message["metadata"], bound, audience),
        }
        return Opened(
            task_id,
            context_id,
            now,
            orjson.dumps(task["history"]).decode(),
            orjson.dumps(task["artifacts"]).decode(),
            orjson.dumps(task["metadata"]).decode(),
            {"id": task_id, "status": status, "artifacts": task["artifacts"]},
            task,
        )

    def entries(self, claims: dict[str, Any], owner: str, receipt: dict[str, Any]) -> list[Entry]:
        """The rows of the decision and the receipt entered in the log, sealed as the
        member seals them, with the next two seqs of the log (:meth:`store` checks that
        they still are)."""
        at, handoff = _timestamp(datetime.now(UTC)), claims["handoff"]["id"]
        decision = {
            "allowed": True,
            "at": at,
            "claims_digest": "sha256:" + _sha256(canonical_json(claims)),
            "handoff_id": handoff,
            "http_status": 200,
            "jti": claims["jti"],
            "method": "SendMessage",
            "owner": owner,
            "reason": "allowed",
            "req_digest": claims.get("req_digest"),
            "trace_id": uuid.uuid4().hex,
        }
        rows: list[Entry] = []
        for offset, (kind, data, key) in enumerate(
            (
                ("decision", decision, f"decision:{uuid.uuid4().hex[:16]}:{self.log.size}"),
                ("receipt", receipt, f"receipt:{receipt['task_id']}"),
            )
        ):
            record: dict[str, Any] = {"recorded_at": at, "kind": kind, "data": data}
            record["seq"] = self.log.size + 1 + offset
            canonical = canonical_json(record)
            rows.append((record["seq"], _sha256(canonical), canonical.decode(), key, handoff))
        return rows

    def store(
        self,
        claims: dict[str, Any],
        owner: str,
        opened: Opened,
        entries: list[Entry],
    ) -> None:
        key, now_ms = claims["handoff"]["duplicate_key"], int(opened.changed_at.timestamp() * 1000)
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute(_FIND_KEY, (owner, key, owner, key)).fetchone() is not None:
                raise Refused(409)
            db.execute(_RESERVE).fetchone()
            claim = (claims["iss"], claims["jti"], claims["exp"] + LEEWAY)
            if db.execute(_CLAIM, claim).rowcount != 1:
                raise Refused(409)
            db.execute(_WATCH, (*claim, orjson.dumps(claims).decode()))
            if int(db.execute(_LAST_SEQ).fetchone()[0] or 0) != self.log.size:
                raise Refused(503)  # the log moved: the entries' seqs are no longer its next
            db.execute(_ENTER, [value for entry in entries for value in entry])
            (sequence,) = db.execute(_BUMP).fetchone()
            db.execute(
                _INSERT_TASK,
                (opened.id, owner, opened.context_id, TaskState.COMPLETED.value, now_ms,
                 sequence, opened.history, opened.artifacts, opened.metadata, key,
                 now_ms + KEY_RETENTION_MS, MEMBER, now_ms + LEASE_MS),
            )  # fmt: skip
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def answer(self, request_id: Any, opened: Opened, receipt: str) -> bytes:
        task = opened.held
        task["metadata"][RECEIPTS_EXTENSION_URI][RECEIPT_KEY] = receipt
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"task": task}})


class ModelsFloor(TablesFloor):
    """:class:`TablesFloor` with remote_risk's representation: the request, the task
    and the answer as wire models, the row as its store dumps it."""

    def open(
        self, message_json: dict[str, Any], data: dict[str, Any], bound: Bound, audience: str
    ) -> Opened:
        message = SendMessageRequest.model_validate({"message": message_json}).message
        outcome = run_now(_RISK_SKILL, skill_input_of(message, _RISK_SKILL))
        task_id, context_id, now = str(uuid.uuid4()), str(uuid.uuid4()), datetime.now(UTC)
        metadata = _metadata(message.metadata or {}, bound, audience)
        opened = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        record = TaskRecord(task_id, "", context_id, TaskState.SUBMITTED, now, 1, None,
                            [opened], [], metadata)  # fmt: skip
        move(record, TaskState.WORKING, None, now, 2)
        record.artifacts.append(outcome_artifact(_RISK_SKILL, outcome.data))
        move(record, TaskState.COMPLETED, None, now, 3)
        task = record.snapshot()
        row = row_values(record)
        wire = task.model_dump(
            mode="json", by_alias=True, exclude_none=True, include={"id", "status", "artifacts"}
        )
        return Opened(task_id, context_id, now, row["history"], row["artifacts"],
                      row["task_metadata"], wire, task)  # fmt: skip

    def answer(self, request_id: Any, opened: Opened, receipt: str) -> bytes:
        task = opened.held
        metadata = dict(task.metadata)
        metadata[RECEIPTS_EXTENSION_URI] = {
            **metadata[RECEIPTS_EXTENSION_URI],
            RECEIPT_KEY: receipt,
        }
        stamped = task.model_copy(update={"metadata": metadata})
        return result_body(request_id, SendMessageResponse(task=stamped))


def _metadata(metadata: dict[str, Any], bound: Bound, audience: str) -> dict[str, Any]:
    """A task's metadata as remote_risk opens it from its message's: the handoff binding,
    and what the token binds under the receipts extension's key."""
    kept = {"jti": bound.jti, "reqDigest": bound.req_digest, "aud": audience}
    binding = {"handoffId": metadata.get("handoffId"), "attempt": metadata.get("attempt")}
    return {**binding, RECEIPTS_EXTENSION_URI: kept}


def _timestamp(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


if __name__ == "__main__":
    chosen = argparse.ArgumentParser(add_help=False)
    chosen.add_argument("--models", action="store_true")
    known, rest = chosen.parse_known_args()
    main(ModelsFloor if known.models else TablesFloor, (__doc__ or "").splitlines()[0], rest)
