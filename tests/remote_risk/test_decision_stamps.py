"""A decision's time is written as it always was, with the text of its second kept.

:mod:`member_kit.trust.decisions` stamps each decision ``YYYY-MM-DDTHH:MM:SS.mmmZ``,
the text ``datetime.now(UTC).isoformat(timespec="milliseconds")`` gives with ``Z``; it
now writes the second's text once per second. Every instant reads as before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from member_kit.trust.decisions import _now, _Stamps

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stamped_before(nanoseconds: int) -> str:
    """The stamp as ``datetime`` writes it (it keeps microseconds, cut from nanoseconds)."""
    moment = EPOCH + timedelta(microseconds=nanoseconds // 1000)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@settings(max_examples=1000, deadline=None)
@given(st.integers(min_value=0, max_value=(2**35) * 10**9))
def test_every_instant_is_stamped_as_before(nanoseconds: int) -> None:
    assert _Stamps().at(nanoseconds) == stamped_before(nanoseconds)


def test_instants_of_one_second_and_the_next_share_nothing_but_their_text() -> None:
    stamps = _Stamps()
    second = 1_796_000_000 * 10**9
    for offset in (0, 999_999, 1_000_000, 999_999_999, 10**9, 10**9 + 1, 5, 2 * 10**9 - 1):
        assert stamps.at(second + offset) == stamped_before(second + offset)


def test_the_stamp_now_is_between_the_instants_around_it() -> None:
    before = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    stamp = _now()
    after = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert before <= stamp <= after
