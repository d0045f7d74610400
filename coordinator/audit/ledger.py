"""The audit ledger: every cross-service fact, append-only and hash-chained.

Each event is a plain record (type, time, correlation fields, a JSON ``data`` object)
that passes through a chain of small processors (redaction first) and is then sealed:
it gets the next sequence number and the previous event's hash, is serialised with
RFC 8785 (the ``rfc8785`` package), and its ``hash`` is the SHA-256 of those bytes::

    record -> processors (redact) -> seal (seq, prev_hash, RFC 8785, sha256) -> insert

The canonical bytes are stored with the event (column ``canonical``), so :func:`verify`
checks an event with one SHA-256 instead of re-running the pure-Python canonicaliser,
which would cap it near 17,000 events/s. The other columns repeat the record's fields
for queries; verify checks that they still agree with it (inside SQLite with
``json_extract``, in Python on PostgreSQL). ``strict=True`` also re-runs the canonicaliser.

What a chain can and cannot show: editing, deleting, inserting or reordering any event
breaks a link that :func:`verify` names precisely. Cutting events off the *end* leaves a
shorter chain that is still internally valid; only a head signed earlier
(:func:`sign_head`) reveals it, so pass one to :func:`verify`.

Appends are serialised by the database: ``BEGIN IMMEDIATE`` on SQLite, a
transaction-level advisory lock on PostgreSQL. The primary key on ``seq`` makes a writer
that somehow raced anyway fail with ``chain_conflict`` instead of forking the chain.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from operator import itemgetter
from typing import Any

import jwt
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from jwt.algorithms import OKPAlgorithm
from sqlalchemy import Connection, Engine, and_, func, select, text
from sqlalchemy.sql.expression import ColumnElement

from contracts import strict_json
from contracts.canonical import CanonicalizationError, canonical_json
from coordinator.errors import LedgerError
from coordinator.storage import driver
from coordinator.storage.engine import write_transaction
from coordinator.storage.schema import audit_events

GENESIS_HASH = "0" * 64
HEAD_TYP = "ledger-head+jwt"
BUNDLE_TYP = "ledger-bundle+jwt"
BUNDLE_FORMAT = "a2a-federation.ledger-bundle/1"
REDACTED = "[redacted]"

# The record's fields other than ``data``, in column order; ``seq`` and ``prev_hash`` are
# added when the record is sealed.
CORRELATION_FIELDS = (
    "event_type",
    "recorded_at",
    "run_id",
    "handoff_id",
    "attempt",
    "actor",
    "remote_task_id",
    "trace_id",
)
_STRING_LIMITS = {
    "event_type": 64,
    "run_id": 128,
    "handoff_id": 128,
    "actor": 256,
    "remote_task_id": 256,
    "trace_id": 64,
}
# Arbitrary, fixed: the class half of PostgreSQL's two-key advisory lock for appends.
_APPEND_LOCK_CLASS = 0x4C454447
_YIELD_PER = 5000

Processor = Callable[[dict[str, Any]], dict[str, Any]]


# --- events ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AuditEvent:
    """A fact to record. ``recorded_at`` defaults to the ledger's clock."""

    event_type: str
    actor: str
    data: Mapping[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    handoff_id: str | None = None
    attempt: int | None = None
    remote_task_id: str | None = None
    trace_id: str | None = None
    recorded_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class StoredEvent:
    """An event as the ledger holds it: its record plus its place in the chain."""

    seq: int
    prev_hash: str
    hash: str
    event_type: str
    recorded_at: datetime
    actor: str
    data: dict[str, Any]
    run_id: str | None = None
    handoff_id: str | None = None
    attempt: int | None = None
    remote_task_id: str | None = None
    trace_id: str | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], digest: str) -> StoredEvent:
        values = {name: record[name] for name in CORRELATION_FIELDS}
        values["recorded_at"] = datetime.fromisoformat(record["recorded_at"])
        return cls(
            seq=record["seq"],
            prev_hash=record["prev_hash"],
            hash=digest,
            data=record["data"],
            **values,
        )


def timestamp(at: datetime) -> str:
    """The one text form of a time in the ledger: UTC, microseconds, ``Z``."""
    if at.tzinfo is None:
        raise LedgerError("recorded_at must be timezone-aware", "event_invalid")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now() -> datetime:
    return datetime.now(UTC)


# --- processors -----------------------------------------------------------------------

_SECRET_NAME = re.compile(r"token|authorization|password|passwd|secret|api[_-]?key", re.I)
_BEARER_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S", re.I)
_JWT_VALUE = re.compile(r"^eyJ[\w-]*\.[\w-]+\.[\w-]*$")


def _redacted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: REDACTED if _SECRET_NAME.search(str(key)) else _redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    if isinstance(value, str) and (_BEARER_VALUE.match(value) or _JWT_VALUE.match(value)):
        return REDACTED
    return value


def redact_secrets(record: dict[str, Any]) -> dict[str, Any]:
    """Replace anything in ``data`` named like a credential, or shaped like one, by a marker.

    Keys containing ``token``, ``authorization``, ``password``, ``secret`` or ``api_key``
    (any case, at any depth) and string values that look like ``Bearer ...`` or a JWT are
    replaced by ``"[redacted]"``. It errs on the side of hiding: ``token_count`` goes too.
    """
    record["data"] = _redacted(record["data"])
    return record


DEFAULT_PROCESSORS: tuple[Processor, ...] = (redact_secrets,)


# --- sealing --------------------------------------------------------------------------


def _check_record(record: Mapping[str, Any]) -> None:
    if not record["event_type"] or not record["actor"]:
        raise LedgerError("an event needs an event_type and an actor", "event_invalid")
    for name, limit in _STRING_LIMITS.items():
        value = record[name]
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise LedgerError(f"{name} must be text of at most {limit} characters", "event_invalid")
    if record["attempt"] is not None and not isinstance(record["attempt"], int):
        raise LedgerError("attempt must be an integer", "event_invalid")
    if not isinstance(record["data"], dict):
        raise LedgerError("data must be a JSON object", "event_invalid")


def canonical_bytes(record: Mapping[str, Any]) -> bytes:
    """RFC 8785 serialisation of a sealed record, or ``event_invalid``."""
    try:
        return canonical_json(dict(record))
    except CanonicalizationError as exc:
        raise LedgerError(f"event is not canonical JSON: {exc}", "event_invalid") from None


def record_hash(record: Mapping[str, Any]) -> str:
    """The hash of a sealed record (one with ``seq`` and ``prev_hash``)."""
    return hashlib.sha256(canonical_bytes(record)).hexdigest()


def _seal(record: dict[str, Any], seq: int, prev_hash: str) -> dict[str, Any]:
    """The row for ``record`` placed at ``seq`` after ``prev_hash``."""
    sealed = {**record, "seq": seq, "prev_hash": prev_hash}
    body = canonical_bytes(sealed)
    row = {name: record[name] for name in CORRELATION_FIELDS}
    row.update(
        seq=seq,
        prev_hash=prev_hash,
        hash=hashlib.sha256(body).hexdigest(),
        canonical=body.decode("utf-8"),
    )
    return row


def _stored(canonical: str, digest: str) -> StoredEvent:
    return StoredEvent.from_record(json.loads(canonical), digest)


# --- the ledger -----------------------------------------------------------------------


def _lock_chain(connection: Connection) -> None:
    """Serialise appenders on PostgreSQL (SQLite already holds its write lock)."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            text("SELECT pg_advisory_xact_lock(:cls, hashtext(current_schema()))"),
            {"cls": _APPEND_LOCK_CLASS},
        )


# Built once: constructing a statement costs more than running it on SQLite.
_HEAD_SQL = f"SELECT seq, hash FROM {audit_events.name} ORDER BY seq DESC LIMIT 1"
_INSERT_EVENT_SQL = driver.insert_sql(audit_events.name, (c.name for c in audit_events.columns))


def _head(connection: Connection) -> tuple[int, str]:
    row = driver.execute(connection, _HEAD_SQL).fetchone()
    return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))


class Ledger:
    """Append and read the audit ledger stored in ``engine``'s database."""

    def __init__(
        self,
        engine: Engine,
        *,
        processors: Sequence[Processor] = DEFAULT_PROCESSORS,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.engine = engine
        self._processors = tuple(processors)
        self._clock = clock

    def _record(self, event: AuditEvent) -> dict[str, Any]:
        record: dict[str, Any] = {
            "event_type": event.event_type,
            "recorded_at": timestamp(event.recorded_at or self._clock()),
            "run_id": event.run_id,
            "handoff_id": event.handoff_id,
            "attempt": event.attempt,
            "actor": event.actor,
            "remote_task_id": event.remote_task_id,
            "trace_id": event.trace_id,
            "data": dict(event.data),
        }
        for processor in self._processors:
            record = processor(record)
        _check_record(record)
        return record

    def append(self, event: AuditEvent) -> StoredEvent:
        """Record one event at the end of the chain."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[AuditEvent]) -> list[StoredEvent]:
        """Record several events in one transaction: all of them, consecutively, or none."""
        rows = self._append(events, None)
        return [_stored(row["canonical"], row["hash"]) for row in rows]

    def append_many_with(
        self, events: Iterable[AuditEvent], also: Callable[[Connection], None] | None = None
    ) -> int:
        """Append ``events`` with ``also`` written in the same transaction first (the run
        store's pending rows, say): the rows and the facts land together or not at all.
        Returns how many events were appended."""
        return len(self._append(events, also))

    def _append(
        self, events: Iterable[AuditEvent], also: Callable[[Connection], None] | None
    ) -> list[dict[str, Any]]:
        records = [self._record(event) for event in events]
        if not records and also is None:
            return []
        rows: list[dict[str, Any]] = []
        try:
            with write_transaction(self.engine) as connection:
                if also is not None:
                    also(connection)
                if records:
                    _lock_chain(connection)
                    seq, prev_hash = _head(connection)
                    for offset, record in enumerate(records, start=1):
                        rows.append(_seal(record, seq + offset, prev_hash))
                        prev_hash = rows[-1]["hash"]
                    driver.execute_many(connection, _INSERT_EVENT_SQL, rows)
        except driver.integrity_errors(self.engine) as exc:
            raise LedgerError(
                "another writer took the same sequence number; nothing was appended",
                "chain_conflict",
            ) from exc
        return rows

    def events(self, run_id: str | None = None) -> list[StoredEvent]:
        """Every event in sequence order, or only those of one run."""
        query = select(audit_events.c.hash, audit_events.c.canonical)
        if run_id is not None:
            query = query.where(audit_events.c.run_id == run_id)
        with self.engine.connect() as connection:
            rows = connection.execute(query.order_by(audit_events.c.seq))
            return [_stored(canonical, digest) for digest, canonical in rows]

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last event; ``(0, GENESIS_HASH)`` when empty."""
        with self.engine.connect() as connection:
            return _head(connection)

    def skeleton(self, up_to: int) -> list[tuple[int, str, str]]:
        """``(seq, prev_hash, hash)`` of every event up to ``up_to``."""
        c = audit_events.c
        query = select(c.seq, c.prev_hash, c.hash).where(c.seq <= up_to).order_by(c.seq)
        with self.engine.connect() as connection:
            return [(int(s), str(p), str(h)) for s, p, h in connection.execute(query)]


# --- verification ---------------------------------------------------------------------


class Break(StrEnum):
    """What is wrong at the first broken place of a chain."""

    HASH_MISMATCH = "hash_mismatch"  # the event's content was edited
    PREV_MISMATCH = "prev_mismatch"  # the link to the previous event is wrong
    SEQUENCE_GAP = "sequence_gap"  # an event number is missing
    SEQUENCE_DUPLICATE = "sequence_duplicate"  # an event number occurs twice
    NOT_CANONICAL = "not_canonical"  # stored bytes are not RFC 8785 (strict mode)
    TRUNCATED = "truncated"  # the chain ends before a signed head
    HEAD_MISMATCH = "head_mismatch"  # the event a signed head names has another hash
    HEAD_INVALID = "head_invalid"  # the signed head does not verify
    ATTESTATION_INVALID = "attestation_invalid"  # a bundle's signed digest does not match
    UNTRUSTED_KEY = "untrusted_key"  # a bundle signed with a key other than the trusted one
    MALFORMED = "malformed"  # a bundle that does not have the expected shape


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of a verification: ok, or the first broken event and what is wrong."""

    ok: bool
    checked: int
    last_seq: int
    last_hash: str
    seq: int | None = None
    kind: Break | None = None
    detail: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"ok: {self.checked} events, head {self.last_seq} {self.last_hash[:16]}"
        return f"broken at event {self.seq}: {self.kind} ({self.detail})"


class _Links:
    """Checks numbering and links of a chain walked in sequence order."""

    def __init__(self) -> None:
        self.checked = 0
        self.last_seq = 0
        self.last_hash = GENESIS_HASH

    def step(self, seq: int, prev_hash: str, digest: str) -> VerifyReport | None:
        expected = self.last_seq + 1
        if seq != expected:
            if seq <= self.last_seq:
                return self.broken(seq, Break.SEQUENCE_DUPLICATE, "this number occurs again")
            return self.broken(expected, Break.SEQUENCE_GAP, f"missing; the next event is {seq}")
        if prev_hash != self.last_hash:
            return self.broken(
                seq, Break.PREV_MISMATCH, f"prev_hash does not match event {seq - 1}'s hash"
            )
        self.checked, self.last_seq, self.last_hash = seq, seq, digest
        return None

    def broken(self, seq: int, kind: Break, detail: str) -> VerifyReport:
        return VerifyReport(False, self.checked, self.last_seq, self.last_hash, seq, kind, detail)

    def ok(self) -> VerifyReport:
        return VerifyReport(True, self.checked, self.last_seq, self.last_hash)


# The columns that repeat fields of the hashed record, so that they can be queried.
_COMPARED = ("seq", "prev_hash", *CORRELATION_FIELDS)


def _sqlite_columns_agree() -> ColumnElement[bool]:
    """SQL that is true when a row's columns still say what its hashed record says.

    SQLite parses the record in C, so the Python loop only hashes. Only edits of the
    columns are at stake here: the record itself is covered by the hash chain.
    """
    c, extract = audit_events.c, func.json_extract
    return and_(*(extract(c.canonical, f"$.{n}").is_not_distinct_from(c[n]) for n in _COMPARED))


_compared_fields = itemgetter(*_COMPARED)
_raw_decode = json.JSONDecoder().raw_decode


def _agreement_in_python(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
    """The same check in Python, for PostgreSQL, whose jsonb parsing is slower than ours."""
    for row in rows:
        try:
            record, _ = _raw_decode(row[3])
            agrees = _compared_fields(record) == tuple(row[4:])
        except (ValueError, KeyError, TypeError):
            agrees = False
        yield row[0], row[1], row[2], row[3], agrees


def _walk_rows(connection: Connection) -> Generator[tuple[Any, ...], None, None]:
    """``(seq, prev_hash, hash, canonical, columns_agree)`` for every row, in order."""
    c = audit_events.c
    sqlite = connection.dialect.name == "sqlite"
    extra = [_sqlite_columns_agree()] if sqlite else [c[name] for name in _COMPARED]
    query = select(c.seq, c.prev_hash, c.hash, c.canonical, *extra).order_by(c.seq)
    result = connection.execution_options(yield_per=_YIELD_PER).execute(query)
    try:
        rows = result if sqlite else _agreement_in_python(result)
        yield from rows
    finally:
        result.close()


def _column_break(connection: Connection, seq: int) -> str:
    """Which column of event ``seq`` disagrees with its hashed record."""
    row = connection.execute(select(audit_events).where(audit_events.c.seq == seq)).mappings().one()
    record = json.loads(row["canonical"])
    for name in _COMPARED:
        if record.get(name) != row[name]:
            return f"{name} is {row[name]!r} but the hashed record says {record.get(name)!r}"
    return "a column disagrees with the hashed record"


def _walk(rows: Iterable[Sequence[Any]], strict: bool) -> VerifyReport:
    """The tight loop of :func:`verify`: numbering and links, the hash, the columns."""
    links, sha256 = _Links(), hashlib.sha256
    for seq, prev_hash, digest, canonical, agrees in rows:
        broken = links.step(seq, prev_hash, digest)
        if broken is not None:
            return broken
        body = canonical.encode("utf-8")
        if sha256(body).hexdigest() != digest:
            return links.broken(seq, Break.HASH_MISMATCH, "the record does not match its hash")
        if not agrees:
            return links.broken(seq, Break.HASH_MISMATCH, _COLUMNS_DISAGREE)
        if strict and not _is_canonical(body):
            return links.broken(seq, Break.NOT_CANONICAL, "the stored record is not RFC 8785")
    return links.ok()


_COLUMNS_DISAGREE = "columns disagree with the hashed record"


def _is_canonical(body: bytes) -> bool:
    try:
        record = strict_json.loads(body)
        return (
            isinstance(record, dict)
            and isinstance(record.get("data"), dict)
            and canonical_json(record) == body
        )
    except (ValueError, CanonicalizationError):
        return False


def verify(
    engine: Engine,
    *,
    head: str | None = None,
    public_key: Ed25519PublicKey | Mapping[str, Any] | None = None,
    strict: bool = False,
) -> VerifyReport:
    """Walk the whole chain; with a signed ``head`` (and its key) also catch truncation.

    ``strict`` also re-runs the RFC 8785 canonicaliser on every record (about three
    times slower); it catches a record rewritten in another JSON form and rehashed,
    which otherwise only shows as a broken link after it or against a signed head.
    """
    claims: dict[str, Any] | None = None
    if head is not None:
        if public_key is None:
            raise LedgerError("checking a signed head needs its public key", "head_invalid")
        try:
            claims = verify_head(head, public_key)
        except LedgerError as exc:
            return VerifyReport(False, 0, 0, GENESIS_HASH, None, Break.HEAD_INVALID, str(exc))
    c = audit_events.c
    with engine.connect() as connection:
        rows = _walk_rows(connection)
        with closing(rows):
            report = _walk(rows, strict)
        if report.detail == _COLUMNS_DISAGREE and report.seq is not None:
            return _with_break(
                report, report.seq, Break.HASH_MISMATCH, _column_break(connection, report.seq)
            )
        if claims is None or not report.ok:
            return report
        at_head = connection.execute(select(c.hash).where(c.seq == claims["seq"])).scalar()
    return _against_head(report, claims, at_head)


def _against_head(
    report: VerifyReport, claims: Mapping[str, Any], at_head: str | None
) -> VerifyReport:
    seq = claims["seq"]
    if report.last_seq < seq:
        return _with_break(
            report,
            report.last_seq + 1,
            Break.TRUNCATED,
            f"the signed head covers events up to {seq}",
        )
    if at_head != claims["hash"]:
        return _with_break(report, seq, Break.HEAD_MISMATCH, "hash differs from the signed head")
    return report


def _with_break(report: VerifyReport, seq: int, kind: Break, detail: str) -> VerifyReport:
    return VerifyReport(False, report.checked, report.last_seq, report.last_hash, seq, kind, detail)


# --- signed heads ---------------------------------------------------------------------


def public_jwk(key: Ed25519PublicKey | Ed25519PrivateKey) -> dict[str, str]:
    """The public JWK (OKP, Ed25519) of a key, with its RFC 7638 thumbprint as ``kid``."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
    members = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    return {**members, "kid": thumbprint(members), "alg": "EdDSA", "use": "sig"}


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint of an OKP key: SHA-256 over its required members, base64url."""
    members = {name: jwk[name] for name in ("crv", "kty", "x")}
    digest = hashlib.sha256(rfc8785.dumps(members)).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _public_key(key: Ed25519PublicKey | Mapping[str, Any]) -> tuple[Ed25519PublicKey, str]:
    if isinstance(key, Ed25519PublicKey):
        return key, thumbprint(public_jwk(key))
    if "d" in key or key.get("kty") != "OKP" or key.get("crv") != "Ed25519":
        raise LedgerError("the key is not a public Ed25519 JWK", "head_invalid")
    public = OKPAlgorithm.from_jwk(dict(key))
    if not isinstance(public, Ed25519PublicKey):
        raise LedgerError("the key is not a public Ed25519 JWK", "head_invalid")
    computed = thumbprint(public_jwk(public))
    if key.get("kid", computed) != computed:
        raise LedgerError("the JWK's kid is not its RFC 7638 thumbprint", "kid_not_thumbprint")
    return public, computed


def _sign(claims: dict[str, Any], private_key: Ed25519PrivateKey, typ: str) -> str:
    kid = thumbprint(public_jwk(private_key))
    return jwt.encode(claims, private_key, algorithm="EdDSA", headers={"typ": typ, "kid": kid})


def _verified_claims(
    token: str, key: Ed25519PublicKey | Mapping[str, Any], typ: str
) -> dict[str, Any]:
    public, kid = _public_key(key)
    try:
        decoded = jwt.api_jwt.decode_complete(token, public, algorithms=["EdDSA"])
    except jwt.PyJWTError as exc:
        raise LedgerError(f"signature does not verify: {exc}", "head_invalid") from None
    header = decoded["header"]
    if header.get("typ") != typ or header.get("kid") != kid:
        raise LedgerError(f"expected typ {typ} signed by key {kid}", "head_invalid")
    claims: dict[str, Any] = decoded["payload"]
    return claims


def _head_claims(seq: int, digest: str, issuer: str, now: datetime | None) -> dict[str, Any]:
    return {"seq": seq, "hash": digest, "issued_at": timestamp(now or _now()), "iss": issuer}


def sign_head(
    ledger: Ledger,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    now: datetime | None = None,
) -> dict[str, Any]:
    """Sign the current chain head: ``{seq, hash, issued_at, iss, kid, jws}``."""
    seq, digest = ledger.head()
    claims = _head_claims(seq, digest, issuer, now)
    return {
        **claims,
        "kid": thumbprint(public_jwk(private_key)),
        "jws": _sign(claims, private_key, HEAD_TYP),
    }


def verify_head(token: str, public_key: Ed25519PublicKey | Mapping[str, Any]) -> dict[str, Any]:
    """The claims of a signed head, or ``head_invalid``."""
    claims = _verified_claims(token, public_key, HEAD_TYP)
    if not (
        isinstance(claims.get("seq"), int)
        and isinstance(claims.get("hash"), str)
        and isinstance(claims.get("issued_at"), str)
        and isinstance(claims.get("iss"), str)
    ):
        raise LedgerError("a signed head needs seq, hash, issued_at and iss", "head_invalid")
    return claims


# --- bundles --------------------------------------------------------------------------


def _bundle_digest(run_id: str, events: list[Any], chain: list[Any]) -> str:
    document = {"run_id": run_id, "events": events, "chain": chain}
    return hashlib.sha256(canonical_bytes(document)).hexdigest()


def _event_document(event: StoredEvent) -> dict[str, Any]:
    document = {name: getattr(event, name) for name in ("seq", "prev_hash", *CORRELATION_FIELDS)}
    document.update(recorded_at=timestamp(event.recorded_at), data=event.data, hash=event.hash)
    return document


def export_bundle(
    ledger: Ledger,
    run_id: str,
    private_key: Ed25519PrivateKey,
    *,
    issuer: str = "coordinator",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A self-contained JSON document that lets a third party check one run offline.

    It holds the run's full events, the ``(seq, prev_hash, hash)`` skeleton of the whole
    chain up to the head, the signed head, and a signed attestation of the SHA-256 of
    the events and skeleton (so that the skeleton entries, which a reader cannot
    recompute, cannot be rewritten either), plus the public JWK. Other runs' contents are
    not disclosed.
    """
    seq, digest = ledger.head()
    chain = [list(entry) for entry in ledger.skeleton(up_to=seq)]
    events = [_event_document(e) for e in ledger.events(run_id) if e.seq <= seq]
    head = _head_claims(seq, digest, issuer, now)
    attestation = {
        **head,
        "run_id": run_id,
        "bundle_sha256": _bundle_digest(run_id, events, chain),
    }
    return {
        "format": BUNDLE_FORMAT,
        "run_id": run_id,
        "events": events,
        "chain": chain,
        "head": _sign(head, private_key, HEAD_TYP),
        "attestation": _sign(attestation, private_key, BUNDLE_TYP),
        "public_jwk": public_jwk(private_key),
    }


def _bundle_shape(bundle: Mapping[str, Any]) -> str | None:
    """What is missing from a bundle's shape, if anything."""
    if bundle.get("format") != BUNDLE_FORMAT:
        return f"format is not {BUNDLE_FORMAT}"
    expected = {"run_id": str, "events": list, "chain": list, "head": str, "attestation": str}
    for name, kind in expected.items():
        if not isinstance(bundle.get(name), kind):
            return f"{name} is missing or not a {kind.__name__}"
    if not isinstance(bundle.get("public_jwk"), dict):
        return "public_jwk is missing"
    for entry in bundle["chain"]:
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and isinstance(entry[0], int)
            and all(isinstance(part, str) for part in entry[1:])
        ):
            return "a chain entry is not [seq, prev_hash, hash]"
    if not all(isinstance(e, dict) and isinstance(e.get("seq"), int) for e in bundle["events"]):
        return "an event is not an object with a seq"
    return None


def _check_events(links: _Links, bundle: Mapping[str, Any]) -> VerifyReport | None:
    """Recompute each full event's hash and place it on the skeleton."""
    chain = {entry[0]: entry for entry in bundle["chain"]}
    for document in bundle["events"]:
        record = {name: value for name, value in document.items() if name != "hash"}
        seq = record["seq"]
        if seq not in chain or record.get("run_id") != bundle["run_id"]:
            return links.broken(seq, Break.MALFORMED, "event is not in the chain or not this run's")
        try:
            digest = record_hash(record)
        except LedgerError as exc:
            return links.broken(seq, Break.HASH_MISMATCH, str(exc))
        if digest != document.get("hash") or digest != chain[seq][2]:
            return links.broken(seq, Break.HASH_MISMATCH, "the event does not match its hash")
        if record.get("prev_hash") != chain[seq][1]:
            return links.broken(seq, Break.PREV_MISMATCH, "prev_hash differs from the chain's")
    return None


def _bundle_key(
    bundle: Mapping[str, Any], trusted: Mapping[str, Any] | None
) -> tuple[Mapping[str, Any], str | None]:
    key: Mapping[str, Any] = bundle["public_jwk"]
    if trusted is None:
        return key, None
    try:
        same = thumbprint(trusted) == thumbprint(key)
    except (KeyError, TypeError, rfc8785.CanonicalizationError):
        same = False
    return trusted, None if same else "the bundle is signed by another key than the trusted one"


def verify_bundle(
    bundle: Mapping[str, Any], trusted_public_jwk: Mapping[str, Any] | None = None
) -> VerifyReport:
    """Check a bundle from :func:`export_bundle` offline.

    Without ``trusted_public_jwk`` the bundle is checked against the key it carries, which
    only shows that it is internally consistent; pass the ledger's published key to know
    who vouches for it.
    """
    links = _Links()
    shape = _bundle_shape(bundle)
    if shape is not None:
        return links.broken(0, Break.MALFORMED, shape)
    key, untrusted = _bundle_key(bundle, trusted_public_jwk)
    if untrusted is not None:
        return links.broken(0, Break.UNTRUSTED_KEY, untrusted)
    try:
        head = verify_head(bundle["head"], key)
        attestation = _verified_claims(bundle["attestation"], key, BUNDLE_TYP)
    except LedgerError as exc:
        return links.broken(0, Break.HEAD_INVALID, str(exc))
    for seq, prev_hash, digest in bundle["chain"]:
        broken = links.step(seq, prev_hash, digest)
        if broken is not None:
            return broken
    broken = _check_events(links, bundle)
    if broken is not None:
        return broken
    if links.last_seq > head["seq"]:
        return links.broken(head["seq"] + 1, Break.MALFORMED, "the chain runs past the signed head")
    report = _against_head(links.ok(), head, links.last_hash)
    if not report.ok:
        return report
    digest = _bundle_digest(bundle["run_id"], bundle["events"], bundle["chain"])
    if attestation.get("bundle_sha256") != digest or attestation.get("seq") != head["seq"]:
        return links.broken(
            0, Break.ATTESTATION_INVALID, "events or chain differ from what was signed"
        )
    return report
