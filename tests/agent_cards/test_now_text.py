"""The ledgers' timestamps are written as ``strftime`` wrote them, whatever the moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent_cards.transparency.heads import now_text

FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
MOMENTS = [
    datetime(2026, 12, 5, 20, 36, 32, 123456, tzinfo=UTC),
    datetime(2026, 1, 1, tzinfo=UTC),  # no microseconds: still six digits
    datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
    datetime(9999, 12, 31, 18, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),
    datetime(999, 3, 4, 5, 6, 7, 8, tzinfo=UTC),  # before year 1000
    datetime(2026, 3, 29, 1, 30),  # naive: local time, as astimezone takes it
]


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_a_moment_is_written_as_strftime_wrote_it(moment: datetime) -> None:
    assert now_text(moment) == moment.astimezone(UTC).strftime(FORMAT)


def test_now_is_utc_to_the_microsecond() -> None:
    before = datetime.now(UTC)
    text = now_text()
    after = datetime.now(UTC)
    parsed = datetime.strptime(text, FORMAT).replace(tzinfo=UTC)
    assert before <= parsed <= after and len(text) == len("2026-01-01T00:00:00.000000Z")
