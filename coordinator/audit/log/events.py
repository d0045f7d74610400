"""Ledger events: what is recorded, how it is redacted, and how it is sealed into the chain.

Each event is a plain record (type, time, correlation fields, a JSON ``data`` object)
that passes through a chain of small processors (redaction first) and is then sealed:
it gets the next sequence number and the previous event's hash, is serialised with
RFC 8785 (the ``rfc8785`` package), and its ``hash`` is the SHA-256 of those bytes::

    record -> processors (redact) -> seal (seq, prev_hash, RFC 8785, sha256) -> insert
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contracts.canonical import CanonicalizationError, canonical_json
from coordinator.errors import LedgerError

GENESIS_HASH = "0" * 64
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


# Budget units booked with no event of their own to ride on (a local role's model
# requests, a refusal of a cancelled run): in ledgers written before units rode on the
# event that moved them, every unit was one.
UNITS_EVENT = "budget.units"


def units_in(event_type: str, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The budget units an event records, in either form the ledger has held: a
    :data:`UNITS_EVENT` is one unit; any other event carries its units (reserved at
    admission, rejected with a denial, consumed and released with the transition that
    ended its handoff) in ``units``."""
    if event_type == UNITS_EVENT:
        return [dict(data)]
    units = data.get("units")
    return [dict(unit) for unit in units] if isinstance(units, list) else []


TRANSITION_EVENT = "handoff.transition"
ADMITTED_EVENT = "handoff.admitted"
DISPATCH_EVENT = "message.dispatched"


def admission_in(event_type: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The admission of a handoff an event records (its ``contract``, ``state`` and
    ``reason``), or None: a :data:`ADMITTED_EVENT`'s own, or the one the dispatch it was
    held for carries in ``admission`` (its reserved units are the dispatch's ``units``)."""
    if event_type == ADMITTED_EVENT:
        return {name: value for name, value in data.items() if name != "units"}
    if event_type != DISPATCH_EVENT:
        return None
    admission = data.get("admission")
    return dict(admission) if isinstance(admission, dict) else None


def transition_in(event_type: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The change of a handoff's state an event records (``from``, ``to``, ``reason``,
    ``version``), or None: a :data:`TRANSITION_EVENT` is one; an event that caused one
    (the dispatch, an artifact's verdict) carries it in ``transition``."""
    if event_type == TRANSITION_EVENT:
        return dict(data)
    moved = data.get("transition")
    return dict(moved) if isinstance(moved, dict) else None


def timestamp(at: datetime) -> str:
    """The one text form of a time in the ledger: UTC, microseconds, ``Z``."""
    if at.tzinfo is None:
        raise LedgerError("recorded_at must be timezone-aware", "event_invalid")
    utc = at.astimezone(UTC)
    if utc.year < 1000:  # strftime writes such a year unpadded, isoformat would pad it
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # the text of that strftime at a third less of its cost (once per event): isoformat
    # of a UTC time ends in "+00:00", which "Z" replaces
    return utc.isoformat(timespec="microseconds")[:-6] + "Z"


# --- processors -----------------------------------------------------------------------

# The one list of the fields whose values are secrets, matched whole, in any case, with
# "-" read as "_". A count is not a secret: ``model_tokens`` and ``total_tokens`` stay in
# the tamper-evident record (a substring rule hid them). A field that carries a secret is
# added here, and nowhere else.
SECRET_FIELDS = frozenset(
    {
        "authorization", "proxy_authorization", "cookie", "set_cookie",
        "token", "access_token", "refresh_token", "id_token", "bearer_token", "auth_token",
        "api_token", "delegation_token", "operator_token", "audit_token", "metrics_token",
        "subject_token", "actor_token", "client_assertion",
        "password", "passwd", "secret", "client_secret", "api_key", "apikey", "x_api_key",
        "private_key", "credential", "credentials",
    }
)  # fmt: skip
_BEARER_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S", re.I)
_JWT_VALUE = re.compile(r"^eyJ[\w-]*\.[\w-]+\.[\w-]*$")


def is_secret_field(name: object) -> bool:
    return str(name).lower().replace("-", "_") in SECRET_FIELDS


def _redacted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: REDACTED if is_secret_field(key) else _redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    if isinstance(value, str) and (_BEARER_VALUE.match(value) or _JWT_VALUE.match(value)):
        return REDACTED
    return value


def _alternation(names: Iterable[str]) -> str:
    """The names as one regex alternation factored by their prefixes (a trie), ``_``
    matching ``-`` too: the same strings as ``name1|name2|...``, at a third less of the
    cost (at each position one character is tried per level, not every name in turn)."""
    branches: dict[str, list[str]] = {}
    ends = False
    for name in names:
        if name:
            branches.setdefault(name[0], []).append(name[1:])
        else:
            ends = True
    if not branches:
        return ""
    alternatives = [
        ("[-_]" if first == "_" else re.escape(first)) + _alternation(rests)
        for first, rests in sorted(branches.items())
    ]
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return f"(?:{body})?" if ends else body


# What any secret :func:`_redacted` replaces looks like in the compact JSON text of the
# data, when that text has no escape at all: a field name of SECRET_FIELDS (any case, "-"
# for "_"), a string starting like a bearer or basic credential, or a string that is a
# JWT as _JWT_VALUE reads one (three parts, two dots: a flattened JWS's parts start with
# "eyJ" too, and are none). Text without any of these holds nothing to redact; any
# escape (non-ASCII, control characters, quotes, a newline) and the full walk decides.
# The pattern is matched against the lower-cased text (what re.I did for ASCII, at a
# quarter of the cost: a case-blind alternation ran its branches at every position); a
# quote followed by none of the characters any of it starts with is passed over at once
# (the lookahead), and the names are factored.
_FIRST_CHARACTERS = re.escape("".join(sorted({name[0] for name in SECRET_FIELDS} | set("be"))))
_MAYBE_SECRET = re.compile(
    f'"(?=[{_FIRST_CHARACTERS}\\s])(?:'
    + _alternation(sorted(SECRET_FIELDS))
    + r'"|\s*(?:bearer|basic)\s|eyj[\w-]*\.[\w-]+\.[\w-]*")'
)


def _may_hold_secrets(data: Any) -> bool:
    """False only when ``data`` certainly holds nothing :func:`_redacted` would replace."""
    try:
        text = json.dumps(data, separators=(",", ":"))
    except (TypeError, ValueError):
        return True
    return "\\" in text or _MAYBE_SECRET.search(text.lower()) is not None


def redact_secrets(record: dict[str, Any]) -> dict[str, Any]:
    """Replace anything in ``data`` that is a secret by a marker: the value of a field of
    :data:`SECRET_FIELDS` (at any depth), and any string that looks like ``Bearer ...``
    or a JWT, whatever its field. Counts named like tokens (``model_tokens``) are kept.
    Data whose JSON text shows none of these is left as it is, without walking it.
    """
    if _may_hold_secrets(record["data"]):
        record["data"] = _redacted(record["data"])
    return record


DEFAULT_PROCESSORS: tuple[Processor, ...] = (redact_secrets,)


# --- sealing --------------------------------------------------------------------------


def check_record(record: Mapping[str, Any]) -> None:
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


def seal(record: dict[str, Any], seq: int, prev_hash: str) -> dict[str, Any]:
    """The row for ``record`` placed at ``seq`` after ``prev_hash``."""
    body = _sealed_text(record, seq, prev_hash)
    if body is None:
        body = canonical_bytes({**record, "seq": seq, "prev_hash": prev_hash})
    row = {name: record[name] for name in CORRELATION_FIELDS}
    row.update(
        seq=seq,
        prev_hash=prev_hash,
        hash=hashlib.sha256(body).hexdigest(),
        canonical=body.decode("utf-8"),
    )
    return row


# --- one serialisation per event ------------------------------------------------------
#
# A record's canonical text is made once, when the record is prepared (Ledger.process):
# the redaction pre-check reads that text, and sealing only splices ``prev_hash`` and
# ``seq`` into it. RFC 8785 sorts the members, so with the record's fixed fields the two
# go right before ``recorded_at`` and ``trace_id`` (the last members of those names: the
# values after them are strings or null, whose quotes are escaped), and ``data`` is what
# lies between ``"data":`` (the first: only ``actor`` and ``attempt`` come before) and
# ``event_type`` (the last). The bytes are those of canonical_bytes on the sealed record,
# which a test compares event by event.

RECORD_FIELDS = frozenset((*CORRELATION_FIELDS, "data"))


class Prepared(dict[str, Any]):
    """A processed record with its canonical text, cut where sealing adds its fields."""

    parts: tuple[str, str, str] | None = None


def prepared(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` redacted as :func:`redact_secrets` does, with its canonical text made
    once and kept for :func:`seal` (a record it cannot take stays a plain dict)."""
    if set(record) != RECORD_FIELDS:
        return redact_secrets(record)
    try:
        text = canonical_json(record).decode("utf-8")
    except CanonicalizationError:
        return redact_secrets(record)
    start, end = text.find(',"data":'), text.rfind(',"event_type":')
    at, trace = text.rfind(',"recorded_at":'), text.rfind(',"trace_id":')
    if not 0 < start < end < at < trace or _walk_redacts(record["data"], text[start + 8 : end]):
        return redact_secrets(record)
    kept = Prepared(record)
    kept.parts = (text[:at], text[at:trace], text[trace:])
    return kept


def _walk_redacts(data: Any, text: str) -> bool:
    """Whether :func:`_redacted` replaces anything in ``data`` (``text``: its canonical
    text). The text decides when it shows nothing to redact; otherwise the walk itself
    does, and data it leaves equal (a flattened JWS's ``"eyJ..."`` parts, say) keeps the
    text already made: its sealed bytes are those of the walked copy."""
    return _text_may_hold_secrets(text) and _redacted(data) != data


def _text_may_hold_secrets(text: str) -> bool:
    """:func:`_may_hold_secrets` on the canonical text of ``data``: RFC 8785 leaves
    non-ASCII and DEL unescaped where Python's JSON escapes them, so either one sends the
    record to the walk."""
    return (
        "\\" in text
        or "\x7f" in text
        or not text.isascii()
        or _MAYBE_SECRET.search(text.lower()) is not None
    )


def _sealed_text(record: Mapping[str, Any], seq: int, prev_hash: str) -> bytes | None:
    parts = getattr(record, "parts", None)
    if parts is None or type(seq) is not int or not (prev_hash.isascii() and prev_hash.isalnum()):
        return None
    head, middle, tail = parts
    return f'{head},"prev_hash":"{prev_hash}"{middle},"seq":{seq}{tail}'.encode()


def stored(canonical: str, digest: str) -> StoredEvent:
    return StoredEvent.from_record(json.loads(canonical), digest)
