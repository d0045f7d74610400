"""The collector's settings for a service (agent_cards/runtime/collector.py), each read in a
process of its own: they are the whole process's, never the test runner's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from agent_cards.runtime.collector import GC_ENV, YOUNG_THRESHOLD

# Prints the collector's thresholds and how many objects are frozen, as a JSON list.
_READ = "import gc, json; print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]))"


def _run(code: str, **env: str) -> list[object]:
    environment = {k: v for k, v in os.environ.items() if k != GC_ENV} | env
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_python_alone_collects_every_700_allocations_and_freezes_nothing() -> None:
    thresholds, frozen = _run(_READ)
    assert thresholds[0] == 700 and frozen == 0


def test_settle_freezes_start_up_and_collects_the_young_less_often() -> None:
    code = f"""
        import contracts.wire  # start-up: pydantic's schemas, say
        from agent_cards.runtime import collector
        assert collector.settle()
        {_READ}
    """
    (young, middle, oldest), frozen = _run(code)
    assert young == YOUNG_THRESHOLD and (middle, oldest) == (10, 10)
    assert isinstance(frozen, int) and frozen > 10_000


def test_settle_acts_once_in_a_process() -> None:
    """What a second command in the same process allocated is not frozen for good."""
    code = f"""
        import gc
        from agent_cards.runtime import collector
        assert collector.settle()
        frozen = gc.get_freeze_count()
        kept = [[index] for index in range(5000)]
        assert not collector.settle()
        assert gc.get_freeze_count() == frozen
        {_READ}
    """
    (young, _, _), _ = _run(code)
    assert young == YOUNG_THRESHOLD


def test_default_keeps_pythons_own_settings() -> None:
    code = f"""
        from agent_cards.runtime import collector
        assert not collector.settle()
        {_READ}
    """
    thresholds, frozen = _run(code, **{GC_ENV: "default"})
    assert thresholds[0] == 700 and frozen == 0


def test_every_coordinator_command_runs_settled() -> None:
    """coordinator.loop.run, which every command runs its work on."""
    code = """
        import gc, json
        from coordinator import loop

        async def read():
            return [gc.get_threshold(), gc.get_freeze_count()]

        print(json.dumps(loop.run(read())))
    """
    thresholds, frozen = _run(code)
    assert thresholds[0] == YOUNG_THRESHOLD and isinstance(frozen, int) and frozen > 0
