"""A stranger cannot raise the rate of log lines about what it sends, and nothing it sent
goes unmentioned: past the burst, lines are held back and counted, and the next window's
first line says how many."""

from __future__ import annotations

import logging

import pytest

from agent_cards.edge.rate_limited_log import RateLimitedLog


def test_a_burst_per_key_per_window_then_the_count_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    log = RateLimitedLog(
        logging.getLogger("tests.quiet"), burst=3, interval_seconds=60, clock=lambda: now[0]
    )
    with caplog.at_level(logging.WARNING, logger="tests.quiet"):
        written = [log.log(logging.WARNING, "a", "refused %s", i) for i in range(10)]
        assert log.log(logging.WARNING, "b", "refused b")  # another key has its own burst
        now[0] = 61.0
        assert log.log(logging.WARNING, "a", "refused %s", "later")
    assert written == [True] * 3 + [False] * 7
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "refused 0",
        "refused 1",
        "refused 2",
        "refused b",
        "refused later (and 7 more like it not logged in the window before)",
    ]


def test_a_burst_and_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RateLimitedLog(logging.getLogger("tests.quiet"), burst=0)
