"""Every coordinator entry point runs on uvloop when it is installed, and on asyncio's
own loop when it is not (issue 34, item 2)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from coordinator import loop as event_loop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop not installed")
def test_the_commands_run_on_uvloop_when_it_is_installed() -> None:
    assert event_loop.run(loop_module()).startswith("uvloop")


def test_without_uvloop_the_standard_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop.run(loop_module()).startswith("asyncio")
