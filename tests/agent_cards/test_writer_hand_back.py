"""How an awaited job comes back to the event loop (issue 34): the writer thread resolves
the caller's own asyncio future with one ``call_soon_threadsafe``, and no concurrent
future is chained to it (``asyncio.wrap_future``) on the way; items awaited in one turn
of the loop go to the thread together and come back in one wake-up; what the caller sees
is as before: the value, the job's own exception, and a caller that gave up changes
nothing."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import pytest

from agent_cards.storage.writer import Writer

ROUNDS = 10


class CountingLoop(asyncio.SelectorEventLoop):
    """A real event loop that counts the callbacks other threads hand it."""

    threadsafe_calls = 0

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(callback, *args, context=context)


def _upper(items: Sequence[str]) -> list[Any]:
    return [ValueError(item) if item == "bad" else item.upper() for item in items]


def test_an_awaited_job_is_one_loop_wake_up_and_no_chained_future(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chained: list[Future[Any]] = []
    wrap_future = asyncio.wrap_future

    def counted(future: Any, *, loop: Any = None) -> Any:
        chained.append(future)
        return wrap_future(future, loop=loop)

    monkeypatch.setattr(asyncio, "wrap_future", counted)
    writer, loop = Writer(), CountingLoop()

    async def main() -> list[Any]:
        committed = [await writer.commit(_upper, f"item{i}") for i in range(ROUNDS)]
        return [*committed, await writer.run(lambda: "ran")]

    try:
        outcomes = loop.run_until_complete(main())
    finally:
        writer.close()
        loop.close()
    assert outcomes == [f"ITEM{i}" for i in range(ROUNDS)] + ["ran"]
    assert chained == []
    assert loop.threadsafe_calls == ROUNDS + 1


def test_an_awaited_job_raises_its_own_exception() -> None:
    writer = Writer()

    def fails() -> None:
        raise KeyError("gone")

    async def main() -> None:
        with pytest.raises(ValueError, match="bad"):
            await writer.commit(_upper, "bad")
        with pytest.raises(KeyError, match="gone"):
            await writer.run(fails)

    try:
        asyncio.run(main())
    finally:
        writer.close()


def test_a_caller_that_gives_up_still_has_its_item_committed() -> None:
    gate = threading.Event()
    writer = Writer()
    committed: list[str] = []

    def commit(items: Sequence[str]) -> list[str]:
        committed.extend(items)
        return list(items)

    async def main() -> str:
        held = asyncio.ensure_future(writer.run(gate.wait))
        given_up = asyncio.ensure_future(writer.commit(commit, "first"))
        await asyncio.sleep(0)  # both are queued
        given_up.cancel()
        gate.set()
        await held
        return str(await writer.commit(commit, "second"))

    try:
        assert asyncio.run(main()) == "second"
    finally:
        writer.close()
    assert committed == ["first", "second"]


def test_a_job_that_ends_after_its_loop_closed_leaves_the_writer_serving() -> None:
    gate = threading.Event()
    writer = Writer()
    left: list[asyncio.Future[bool]] = []

    async def leave() -> None:
        left.append(asyncio.ensure_future(writer.run(gate.wait)))
        await asyncio.sleep(0)

    try:
        asyncio.run(leave())  # the loop closes with the job still waiting
        gate.set()
        assert writer.call(lambda: "still serving") == "still serving"
    finally:
        writer.close()


def _spin(seconds: float) -> None:
    """Work of the loop's turn: the interpreter's lock held, no I/O."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_items_awaited_in_one_turn_of_the_loop_are_committed_together() -> None:
    """However long the turn: an item handed over at once woke the thread, which forced a
    switch of the interpreter's lock within the turn and committed that item alone."""
    writer = Writer()
    batches: list[list[str]] = []

    def commit(items: Sequence[str]) -> list[str]:
        batches.append(list(items))
        return [item.upper() for item in items]

    async def after_work(item: str) -> Any:
        _spin(3 * sys.getswitchinterval())
        return await writer.commit(commit, item)

    async def main() -> list[Any]:
        return list(await asyncio.gather(writer.commit(commit, "first"), after_work("second")))

    try:
        assert asyncio.run(main()) == ["FIRST", "SECOND"]
    finally:
        writer.close()
    assert batches == [["first", "second"]]


def test_a_group_comes_back_to_its_loop_in_one_wake_up() -> None:
    writer, loop = Writer(), CountingLoop()
    batches: list[int] = []

    def commit(items: Sequence[str]) -> list[Any]:
        batches.append(len(items))
        return _upper(items)

    async def main() -> list[Any]:
        items = [f"item{i}" for i in range(ROUNDS)] + ["bad"]
        return list(
            await asyncio.gather(*(writer.commit(commit, i) for i in items), return_exceptions=True)
        )

    try:
        outcomes = loop.run_until_complete(main())
    finally:
        writer.close()
        loop.close()
    assert outcomes[:-1] == [f"ITEM{i}" for i in range(ROUNDS)]
    assert isinstance(outcomes[-1], ValueError)
    assert sum(batches) == ROUNDS + 1
    assert loop.threadsafe_calls == len(batches)
