"""The database writer thread: jobs run off the event loop, in order, items grouped."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agent_cards.storage.writer import Writer


def test_jobs_run_in_the_writer_thread_in_order() -> None:
    writer = Writer()
    seen: list[tuple[int, str]] = []

    async def main() -> list[int]:
        jobs = [writer.run(lambda i=i: seen.append((i, threading.current_thread().name)) or i)
                for i in range(20)]  # fmt: skip
        return list(await asyncio.gather(*jobs))

    try:
        assert asyncio.run(main()) == list(range(20))
    finally:
        writer.close()
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {writer.name}


def test_items_queued_together_are_committed_together_each_with_its_outcome() -> None:
    gate = threading.Event()
    writer = Writer(max_wait=0.0)
    batches: list[list[Any]] = []

    def commit(items: Sequence[Any]) -> list[Any]:
        batches.append(list(items))
        return [ValueError(item) if item == "bad" else item.upper() for item in items]

    async def main() -> list[Any]:
        held = asyncio.ensure_future(writer.run(gate.wait))  # busy: the items queue up
        items = [writer.commit(commit, item) for item in ("a", "bad", "c")]
        waiting = asyncio.gather(*items, return_exceptions=True)
        await asyncio.sleep(0)  # every job above is queued
        gate.set()
        await held
        return list(await waiting)

    try:
        outcomes = asyncio.run(main())
    finally:
        writer.close()
    assert outcomes[0] == "A" and outcomes[2] == "C"
    assert isinstance(outcomes[1], ValueError)
    assert batches == [["a", "bad", "c"]]
    assert writer.batch_sizes[3] == 1


def test_a_batch_that_fails_whole_fails_each_of_its_items() -> None:
    writer = Writer()

    def commit(items: Sequence[Any]) -> list[Any]:
        raise RuntimeError("the database is gone")

    try:
        with pytest.raises(RuntimeError, match="gone"):
            writer.commit_now(commit, "x")
    finally:
        writer.close()


def test_the_event_loop_answers_while_a_job_waits() -> None:
    gate = threading.Event()
    writer = Writer()

    async def main() -> bool:
        job = asyncio.ensure_future(writer.run(gate.wait))
        await asyncio.sleep(0)
        answered = not job.done()  # this coroutine runs although the job still waits
        gate.set()
        await job
        return answered

    try:
        assert asyncio.run(main())
    finally:
        writer.close()
