"""make bench takes the windows of a figure in rounds (bench.rounds): one window of every
side per round, so that a machine whose speed drifts during a level moves each side's
windows alike instead of reading as a ratio."""

from __future__ import annotations

from typing import Any

from bench.rounds import interleaved


def test_windows_are_taken_a_round_at_a_time_and_kept_per_side() -> None:
    taken: list[str] = []

    def window(side: str) -> Any:
        def run() -> Any:
            taken.append(side)
            return {"kind": side, "runs": [{"round": taken.count(side)}]}

        return run

    merged = interleaved({"ours": window("ours"), "base": window("base")}, 3)
    assert taken == ["ours", "base"] * 3
    assert merged == {
        side: {"kind": side, "runs": [{"round": 1}, {"round": 2}, {"round": 3}]}
        for side in ("ours", "base")
    }
