"""The floor of a governed send: remote_risk's checks of a blocking SendMessage, each made
once, in one purpose-built ASGI function and nothing else.

``python -m bench.floor --port P --data-dir D --trust-issuer ISS=JWKS`` serves
``POST /a2a/jsonrpc`` on uvicorn (httptools, uvloop: the stack remote_risk and the a2a-sdk
server run on). Per request, in order: the body read within 64 KiB; the A2A version
header; the bearer token as a compact JWS, its header and payload decoded once, its
algorithm and kid pinned, its Ed25519 signature checked through libsodium, its issuer,
audience (this member's key identity), times, scope and handoff checked; the JSON-RPC
envelope and the message checked against the token's handoff (id, attempt, skill,
idempotency key); the real risk skill; one SQLite transaction (WAL, ``synchronous=NORMAL``)
writing the token's ``jti`` (a replay is refused by its primary key), the task under its
idempotency key, and the decision-log entry of the receipt chained to the one before; the
log's RFC 9162 root by an incremental frontier; one Ed25519 signature over the receipt
(token ``jti``, request digest, task, artifact digest, log size and root); one answer
encoded by orjson and one access line.

Its key is published at ``/.well-known/jwks.json`` for a caller to pin once.
It is a yardstick, not a member: no card, no other method, route or binding, no task
reads, no revocation watch, spans or metrics, and a refusal is a bare status code. What
it measures is how far the checks alone can go in Python on this machine:
``python -m bench.remote_cpu --floor`` runs it in the same rounds as remote_risk and the
a2a-sdk server, with the rungs of :mod:`bench.floor_tables` between: the same checks on
remote_risk's own tables.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from nacl.bindings import crypto_sign, crypto_sign_open
from nacl.exceptions import BadSignatureError

from agent_cards.identity import identity_of
from agent_cards.jws import b64url_decode, b64url_encode
from agent_cards.keys import TrustedKeys
from contracts.wire import to_wire
from member_kit.trust.issuers import signing_keys
from remote_risk.risk import skill

RPC = b"/a2a/jsonrpc"
JWKS = b"/.well-known/jwks.json"
MAX_BODY = 64 * 1024
LEEWAY = 30
SCOPE = "risk:interpret"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS used (jti TEXT PRIMARY KEY, exp INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, idempotency_key TEXT UNIQUE"
    " NOT NULL, owner TEXT NOT NULL, document BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL,"
    " entry BLOB NOT NULL)",
)
access = logging.getLogger("floor.access")


class Refused(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


class Log:
    """The decision log's leaves and its RFC 9162 root, kept as a frontier of subtrees."""

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self.size = 0
        self.frontier: list[tuple[int, bytes]] = []
        for leaf in leaves:
            self.add(leaf)

    def add(self, leaf: bytes) -> None:
        self.size += 1
        self.frontier.append((1, leaf))
        while len(self.frontier) > 1 and self.frontier[-1][0] == self.frontier[-2][0]:
            (size, left), (_, right) = self.frontier[-2], self.frontier[-1]
            self.frontier[-2:] = [(2 * size, hashlib.sha256(b"\x01" + left + right).digest())]

    def root(self) -> bytes:
        node = self.frontier[-1][1]
        for _, left in reversed(self.frontier[:-1]):
            node = hashlib.sha256(b"\x01" + left + node).digest()
        return node


class Floor:
    def __init__(self, data_dir: Path, issuer: str, jwks: Path) -> None:
        keys = signing_keys(None, data_dir)
        self.key = keys.signing_key()
        self.identity = identity_of(self.key.verification_key())
        self.secret = self.key.ed25519_secret
        self.issuer = issuer
        self.pinned = {k.kid: k.ed25519_public for k in TrustedKeys.from_file(jwks)}
        self.db = self.open_database(data_dir)
        self.log = Log(self.leaves())
        self.receipt_header = b64url_encode(orjson.dumps({"alg": "EdDSA", "kid": self.key.kid}))
        self.jwks = orjson.dumps({"keys": [self.key.public_jwk()]})

    def open_database(self, data_dir: Path) -> sqlite3.Connection:
        db = sqlite3.connect(data_dir / "floor.db", isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL"):
            db.execute(f"PRAGMA {pragma}")
        for statement in _SCHEMA:
            db.execute(statement)
        return db

    def leaves(self) -> Iterator[bytes]:
        """The leaf hashes of the log's entries, in order."""
        for (leaf,) in self.db.execute("SELECT hash FROM log ORDER BY seq"):
            yield leaf

    def claims(self, authorization: bytes | None) -> dict[str, Any]:
        if not authorization or not authorization.startswith(b"Bearer "):
            raise Refused(401)
        parts = authorization[7:].decode("ascii", "replace").split(".")
        if len(parts) != 3:
            raise Refused(401)
        try:
            header, payload = orjson.loads(b64url_decode(parts[0])), b64url_decode(parts[1])
            public = self.pinned[header["kid"]]
            if header.get("alg") != "EdDSA" or set(header) - {"alg", "kid", "typ"}:
                raise Refused(401)
            crypto_sign_open(b64url_decode(parts[2]) + f"{parts[0]}.{parts[1]}".encode(), public)
            claims = orjson.loads(payload)
        except (KeyError, ValueError, TypeError, BadSignatureError):
            raise Refused(401) from None
        now = time.time()
        if (
            claims.get("iss") != self.issuer
            or claims.get("aud") != self.identity
            or not claims.get("exp", 0) > now - LEEWAY
            or not claims.get("nbf", now) <= now + LEEWAY
            or SCOPE not in str(claims.get("scope", "")).split()
            or not isinstance(claims.get("jti"), str)
            or not isinstance(claims.get("handoff"), dict)
        ):
            raise Refused(403)
        return claims

    def message(
        self, body: bytes, claims: dict[str, Any]
    ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """The request's id, its data part and its message, once they are checked."""
        try:
            envelope = orjson.loads(body)
            message = envelope["params"]["message"]
            (part,) = message["parts"]
            meta, handoff = message["metadata"], claims["handoff"]
        except (ValueError, KeyError, TypeError):
            raise Refused(400) from None
        if (
            envelope.get("jsonrpc") != "2.0"
            or envelope.get("method") != "SendMessage"
            or message.get("role") != "ROLE_USER"
            or not isinstance(message.get("messageId"), str)
            or meta.get("handoffId") != handoff.get("id")
            or meta.get("attempt") != handoff.get("attempt")
            or meta.get("idempotencyKey") != handoff.get("duplicate_key")
            or meta.get("skillId") != skill.SKILL_ID
            or skill.input_problems(part.get("data"))
        ):
            raise Refused(400)
        return envelope.get("id"), part["data"], message

    def send(self, body: bytes, authorization: bytes | None) -> bytes:
        claims = self.claims(authorization)
        request_id, data, _ = self.message(body, claims)
        finding = orjson.dumps(to_wire(skill.interpret_risk_policy(data)))
        task_id = str(uuid.uuid4())
        entry = orjson.dumps(
            {
                "seq": self.log.size + 1,
                "decision": "allow",
                "jti": claims["jti"],
                "task": task_id,
                "request": hashlib.sha256(body).hexdigest(),
                "artifact": hashlib.sha256(finding).hexdigest(),
            }
        )
        leaf = hashlib.sha256(b"\x00" + entry).digest()
        self.write(claims, task_id, finding, entry, leaf)
        self.log.add(leaf)
        receipt = self.receipt(claims, entry)
        task = {
            "id": task_id,
            "contextId": task_id,
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [
                {"artifactId": "risk-finding", "parts": [{"data": orjson.loads(finding)}]}
            ],
            "metadata": {"receipt": receipt},
        }
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"task": task}})

    def write(
        self, claims: dict[str, Any], task: str, finding: bytes, entry: bytes, leaf: bytes
    ) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT INTO used VALUES (?, ?)", (claims["jti"], claims["exp"]))
            db.execute(
                "INSERT INTO tasks VALUES (?, ?, ?, ?)",
                (task, claims["handoff"]["duplicate_key"], claims["sub"], finding),
            )
            db.execute("INSERT INTO log VALUES (?, ?, ?)", (self.log.size + 1, leaf, entry))
        except sqlite3.IntegrityError:
            db.execute("ROLLBACK")
            raise Refused(409) from None
        db.execute("COMMIT")

    def receipt(self, claims: dict[str, Any], entry: bytes) -> str:
        statement = orjson.dumps(
            {
                "iss": self.identity,
                "aud": claims["iss"],
                "entry": orjson.loads(entry),
                "log_tree_size": self.log.size,
                "log_root_hash": self.log.root().hex(),
            }
        )
        signing_input = f"{self.receipt_header}.{b64url_encode(statement)}"
        signature = crypto_sign(signing_input.encode("ascii"), self.secret)[:64]
        return f"{signing_input}.{b64url_encode(signature)}"


def app(floor: Floor) -> Any:
    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        status, answer = 404, b""
        if scope["method"] == "POST" and scope["raw_path"] == RPC:
            status, answer = await _answer(floor, scope, receive)
        elif scope["method"] == "GET" and scope["raw_path"] == JWKS:  # read once, to pin
            status, answer = 200, floor.jwks
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})
        access.info("POST /a2a/jsonrpc %d %d", status, len(answer))

    return asgi


async def _answer(floor: Floor, scope: dict[str, Any], receive: Any) -> tuple[int, bytes]:
    headers = dict(scope["headers"])
    if headers.get(b"a2a-version") != b"1.0":
        return 400, b""
    body = b""
    while True:
        chunk = await receive()
        body += chunk.get("body", b"")
        if len(body) > MAX_BODY:
            return 413, b""
        if not chunk.get("more_body"):
            break
    try:
        return 200, floor.send(body, headers.get(b"authorization"))
    except Refused as refused:
        return refused.status, b""


def main(
    floor_type: type[Floor] | None = None,
    description: str | None = None,
    argv: list[str] | None = None,
) -> None:
    """Serve ``floor_type`` (the floor by default) as ``python -m`` its module does."""
    parser = argparse.ArgumentParser(description=description or (__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--trust-issuer", required=True, metavar="ISS=JWKS")
    args = parser.parse_args(argv)
    issuer, _, jwks = args.trust_issuer.partition("=")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    floor = (floor_type or Floor)(args.data_dir, issuer, Path(jwks))
    uvicorn.run(
        app(floor),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
