"""The floor of a governed handoff: the coordinator's steps of one handoff, each made once,
in one purpose-built coroutine, against the member floor (:mod:`bench.floor`).

Per handoff, in order: admission (the skill on the pinned card, the run's scope, a budget
unit reserved); a delegation token minted for the handoff (the claims bench.tokens
mints, one Ed25519 signature through libsodium) and the message bound to it; the intent
point (one SQLite transaction: the handoff's row and two ledger events, dispatched with
the admission and grant facts, each chained to the one before by SHA-256 over its
sorted-key JSON); one blocking SendMessage on the worker's kept-alive connection; the
receipt checked (its signature against the member key pinned at the start; issuer,
audience, the token's ``jti``, the request's digest, the task and the artifact's
digest); return admission (a finding whose status is ``ok``, with facts, citing only
records that were sent); the outcome point (the row and two events: returned with the
receipt and its log position, accepted). What it leaves out: the card's signature and
registry, run documents, reconcile, retries, streaming and polling, cancellation, spans
and metrics.

``python -m bench.handoffs floor URL --keys DIR`` drives it as figure (2f).
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import orjson
from nacl.bindings import crypto_sign, crypto_sign_open
from nacl.exceptions import BadSignatureError

from agent_cards.identity import identity_of
from agent_cards.jws import b64url_decode, b64url_encode
from agent_cards.keys import KeySet, TrustedKeys
from bench.loadgen import exchange, send_message_body
from bench.tokens import RISK_SCOPE, delegation_claims, risk_payload
from coordinator.authority.delegator import DEFAULT_ISSUER

SKILL = "interpret-risk-policy"
RPC = "/a2a/jsonrpc"
_SCHEMA = (
    "CREATE TABLE handoffs (id TEXT PRIMARY KEY, state TEXT NOT NULL, jti TEXT NOT NULL,"
    " task TEXT)",
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, prev BLOB NOT NULL, hash BLOB NOT NULL,"
    " canonical BLOB NOT NULL)",
)


class Refused(Exception):
    """A handoff the floor does not accept (what the coordinator would record)."""


class Connection:
    """One kept-alive HTTP/1.1 connection to the member."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes, token: str) -> tuple[int, bytes]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nA2A-Version: 1.0\r\n"
            f"Content-Type: application/json\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return await exchange(*self.streams, request.encode() + body)


class GovernedFloor:
    def __init__(self, url: str, keys: KeySet, root: Path) -> None:
        self.host, _, port = url.removeprefix("http://").partition(":")
        self.port = int(port)
        with urlopen(url + "/.well-known/jwks.json") as answer:  # pinned once, as registered
            (self.member_key,) = TrustedKeys.from_json(answer.read())
        self.member = identity_of(self.member_key)
        self.key = keys.active
        self.header = b64url_encode(
            orjson.dumps({"alg": "EdDSA", "kid": self.key.kid, "typ": "JWT"})
        )
        self.skills, self.scopes, self.budget = {SKILL}, {RISK_SCOPE}, 10**9
        self.db = sqlite3.connect(root / "governed-floor.db", isolation_level=None)
        for statement in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", *_SCHEMA):
            self.db.execute(statement)
        self.seq, self.head = 0, b"\0" * 32

    def connection(self) -> Connection:
        return Connection(self.host, self.port)

    async def handoff(self, connection: Connection) -> bool:
        handoff_id = f"h-{uuid.uuid4().hex}"
        self.admit()
        claims = delegation_claims(self.member, handoff_id, now=int(time.time()))
        token = self.mint(claims)
        payload = risk_payload()
        body = send_message_body(handoff_id, SKILL, payload)
        digest = hashlib.sha256(body).hexdigest()
        facts = {"skill": SKILL, "scope": RISK_SCOPE, "jti": claims["jti"], "request": digest}
        self.point(handoff_id, "DISPATCHED", claims["jti"], None, ("admitted", "dispatched"), facts)
        status, answer = await connection.post(RPC, body, token)
        if status != 200:
            raise Refused(f"send answered {status}")
        task, receipt = self.receipt(answer, claims["jti"], digest)
        admit_return(task, payload)
        returned = {"receipt": receipt["entry"], "log_tree_size": receipt["log_tree_size"]}
        self.point(
            handoff_id, "ACCEPTED", claims["jti"], task["id"], ("returned", "accepted"), returned
        )
        return True

    def admit(self) -> None:
        if SKILL not in self.skills or RISK_SCOPE not in self.scopes or self.budget < 1:
            raise Refused("not admitted")
        self.budget -= 1

    def mint(self, claims: dict[str, Any]) -> str:
        signing_input = f"{self.header}.{b64url_encode(orjson.dumps(claims))}"
        signature = crypto_sign(signing_input.encode("ascii"), self.key.ed25519_secret)[:64]
        return f"{signing_input}.{b64url_encode(signature)}"

    def point(
        self,
        handoff: str,
        state: str,
        jti: str,
        task: str | None,
        kinds: tuple[str, ...],
        facts: dict[str, Any],
    ) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT OR REPLACE INTO handoffs VALUES (?, ?, ?, ?)", (handoff, state, jti, task)
        )
        for kind in kinds:
            self.seq += 1
            event = {
                "seq": self.seq,
                "type": kind,
                "handoff": handoff,
                "state": state,
                "data": facts,
            }
            canonical = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
            digest = hashlib.sha256(self.head + canonical).digest()
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?)", (self.seq, self.head, digest, canonical)
            )
            self.head = digest
        db.execute("COMMIT")

    def receipt(
        self, answer: bytes, jti: str, digest: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            task = orjson.loads(answer)["result"]["task"]
            header, payload, signature = task["metadata"]["receipt"].split(".")
            crypto_sign_open(
                b64url_decode(signature) + f"{header}.{payload}".encode(),
                self.member_key.ed25519_public,
            )
            claims = orjson.loads(b64url_decode(payload))
            artifact = orjson.dumps(task["artifacts"][0]["parts"][0]["data"])
        except (KeyError, IndexError, ValueError, TypeError, BadSignatureError) as exc:
            raise Refused(f"receipt: {exc}") from None
        entry = claims.get("entry", {})
        if (
            claims.get("iss") != self.member
            or claims.get("aud") != DEFAULT_ISSUER
            or entry.get("jti") != jti
            or entry.get("request") != digest
            or entry.get("task") != task["id"]
            or entry.get("artifact") != hashlib.sha256(artifact).hexdigest()
        ):
            raise Refused("receipt does not bind this handoff")
        return task, claims


def admit_return(task: dict[str, Any], payload: dict[str, Any]) -> None:
    """The finding contract: completed, status ok, facts, citing only what was sent."""
    finding = task["artifacts"][0]["parts"][0]["data"]
    sent = {record["id"] for record in payload.values() if isinstance(record, dict)}
    if (
        task["status"]["state"] != "TASK_STATE_COMPLETED"
        or finding.get("status") != "ok"
        or not isinstance(finding.get("facts"), dict)
        or not set(finding.get("evidenceIds", ())) <= sent
    ):
        raise Refused("return not admitted")
