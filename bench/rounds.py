"""Windows taken in rounds: one window of every side per round, the sides in turn.

This machine's speed drifts by a quarter or more over a few minutes (other work on the
host), so the windows of one side taken together and then those of its baseline would
read the drift as a ratio. Taken in rounds, with every side's server up for the whole
level, each round's windows meet the machine alike and the medians keep the ratio.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Window = Callable[[], Any]
"""Runs one window (its own warm-up first); a load generator's result with one run."""


def interleaved(windows: Mapping[str, Window], rounds: int) -> dict[str, Any]:
    """Each side's result with the runs of ``rounds`` windows, taken a round at a time."""
    merged: dict[str, Any] = {}
    for _ in range(rounds):
        for side, window in windows.items():
            result = window()
            merged.setdefault(side, {**result, "runs": []})["runs"].extend(result["runs"])
    return merged
