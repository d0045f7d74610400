"""Every coordinator entry point runs on uvloop, or on asyncio's own loop when asked for
(``FEDERATION_EVENT_LOOP=asyncio``) or when uvloop is missing: see coordinator.loop."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from coordinator import loop as event_loop


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop not installed")
def test_the_commands_run_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.LOOP_ENV, raising=False)
    assert event_loop.run(loop_module()).startswith("uvloop")
    assert event_loop.uvicorn_loop() == "uvloop"


def test_asyncios_loop_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.LOOP_ENV, "asyncio")
    assert event_loop.run(loop_module()).startswith("asyncio")
    assert event_loop.uvicorn_loop() == "asyncio"


def test_without_uvloop_the_standard_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.LOOP_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop.run(loop_module()).startswith("asyncio")
