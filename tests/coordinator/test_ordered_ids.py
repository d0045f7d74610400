"""The coordinator's ids start with the time they were made, so the rows keyed by them
append: each kind is a valid identifier, unique, and one made later sorts after."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from contracts.grant import IDENTIFIER_PATTERN
from coordinator.ids import new_handoff_id, new_jti, new_message_id, new_run_id
from tests.runs import new_run

KINDS: dict[str, tuple[Callable[[], str], int]] = {
    "run": (new_run_id, 6),
    "ho": (new_handoff_id, 6),
    "jti": (new_jti, 10),
    "msg": (new_message_id, 10),
}


@pytest.mark.parametrize("prefix", sorted(KINDS))
def test_an_id_is_its_millisecond_then_random_bytes(prefix: str) -> None:
    make, random_bytes = KINDS[prefix]
    shape = re.compile(rf"{prefix}-([0-9a-f]{{12}})[0-9a-f]{{{2 * random_bytes}}}")
    before = time.time_ns() // 1_000_000
    ids = [make() for _ in range(1000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for text in ids:
        matched = shape.fullmatch(text)
        assert matched is not None and re.fullmatch(IDENTIFIER_PATTERN, text)
        assert before <= int(matched.group(1), 16) <= after
    first = make()
    time.sleep(0.002)
    assert all(make() > first for _ in range(100))


def test_runs_are_named_in_the_order_they_start() -> None:
    first = new_run()
    time.sleep(0.002)
    second = new_run()
    assert first.run_id < second.run_id
