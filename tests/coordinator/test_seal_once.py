"""An event is serialised once (issue 34): the text made when the record is prepared,
with ``prev_hash`` and ``seq`` spliced in, is byte for byte RFC 8785 of the sealed record,
and redaction decides exactly as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from coordinator.audit.log.events import (
    Prepared,
    canonical_bytes,
    prepared,
    redact_secrets,
    seal,
    timestamp,
)

BASE: dict[str, Any] = {
    "event_type": "handoff.transition",
    "recorded_at": "2026-12-05T07:00:00.000000Z",
    "run_id": "run-1",
    "handoff_id": "h-1",
    "attempt": 1,
    "actor": "coordinator",
    "remote_task_id": None,
    "trace_id": None,
}
DATA: dict[str, dict[str, Any]] = {
    "empty": {},
    "plain": {"from": "DISPATCHED", "to": "RETURNED", "units": 3, "ok": True, "n": None},
    "nested-same-names": {"recorded_at": "x", "trace_id": {"seq": 1, "prev_hash": "y"}},
    "names-in-values": {"note": ',"trace_id":"t","recorded_at":'},
    "quotes": {"text": 'say "hi"\n'},
    "non-ascii": {"who": "Zoë", "kelvin": {"\u212aey": 1}},
    "del": {"text": "a\x7fb"},
    "float": {"score": 0.25, "big": 2**40},
    "secret-field": {"Delegation-Token": "abc", "inner": [{"password": "p"}]},
    "bearer": {"header": "Bearer abc.def"},
    "jwt": {"leaked": "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln"},
    "counts": {"model_tokens": 12, "total_tokens": 40},
    # a flattened JWS (a receipt): its parts start like a JWT, yet none is one
    "jws-parts": {"receipt": {"protected": "eyJhbGciOiJFZERTQSJ9", "payload": "eyJ4Ijp7fX0"}},
}
CORRELATION: dict[str, dict[str, Any]] = {
    "all-null": {},
    "all-set": {"remote_task_id": "task-9", "trace_id": "0af7651916cd43dd8448eb211c80319c"},
    "trace-id-looks-like-a-key": {"trace_id": ',"trace_id":', "remote_task_id": ',"seq":'},
}


def _record(data: str, correlation: str) -> dict[str, Any]:
    return {**BASE, **CORRELATION[correlation], "data": json.loads(json.dumps(DATA[data]))}


@pytest.mark.parametrize("correlation", sorted(CORRELATION))
@pytest.mark.parametrize("data", sorted(DATA))
def test_the_spliced_text_is_that_of_the_sealed_record(data: str, correlation: str) -> None:
    expected = redact_secrets(_record(data, correlation))
    record = prepared(_record(data, correlation))
    assert dict(record) == expected  # redacted exactly as before
    for seq, prev_hash in [(1, "0" * 64), (123456, "ab" * 32)]:
        row = seal(record, seq, prev_hash)
        assert row["canonical"].encode() == canonical_bytes(
            {**expected, "seq": seq, "prev_hash": prev_hash}
        )


def test_plain_events_take_the_spliced_path() -> None:
    """The case the cut is for: a plain record is kept with its text, not re-serialised."""
    record = prepared(_record("plain", "all-set"))
    assert isinstance(record, Prepared) and record.parts is not None


def test_what_the_walk_leaves_as_it_was_keeps_its_text() -> None:
    """Text that only looks as if it might hold a secret (a receipt's JWS parts, quotes,
    non-ASCII) is walked; when the walk replaces nothing, the text made once is kept."""
    for data in ("jws-parts", "quotes", "non-ascii"):
        record = prepared(_record(data, "all-set"))
        assert isinstance(record, Prepared) and record.parts is not None, data
    assert not isinstance(prepared(_record("jwt", "all-set")), Prepared)


def test_an_odd_prev_hash_takes_the_general_serialiser() -> None:
    record = prepared(_record("plain", "all-null"))
    row = seal(record, 7, 'a"b')
    assert row["canonical"].encode() == canonical_bytes({**record, "seq": 7, "prev_hash": 'a"b'})


def test_a_record_rfc8785_refuses_is_still_event_invalid() -> None:
    from coordinator.errors import LedgerError

    record = prepared({**BASE, "data": {"huge": 2**60}})
    with pytest.raises(LedgerError) as refused:
        seal(record, 1, "0" * 64)
    assert refused.value.reason == "event_invalid"


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 12, 5, 7, 0, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1999, 1, 1, 0, 30, 0, 5, tzinfo=timezone(timedelta(hours=1))),
        datetime(999, 6, 1, 12, 0, 0, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_the_time_text_is_that_of_the_one_format(at: datetime) -> None:
    """A recorded time reads as it always did: UTC, microseconds, ``Z``, as strftime
    spells it (an unpadded year before 1000 included)."""
    assert timestamp(at) == at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
