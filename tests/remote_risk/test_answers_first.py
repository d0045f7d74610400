"""A new request lets the answers of a committed turn go out before it starts its work
(:mod:`member_kit.server.answers_first`, :func:`member_kit.storage.engine.answers_pending`).

The sends of one turn resume after their commit in the loop's next turn, behind whatever
the loop took in meanwhile; a request that starts its work in between would hold their
answers back. Real SQLite files and the real event loop; the order is read from what each
coroutine did, turn by turn."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from member_kit.server import answers_first
from member_kit.server.answers_first import MAX_YIELDS, AnswersFirst, after_answers
from member_kit.storage.engine import answers_pending, in_turn
from remote_risk.service import create_app
from remote_risk.settings import Settings
from tests.remote_risk.delegated import trusted_changes
from tests.remote_risk.turns import insert, items_database


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with items_database(tmp_path, "answers") as engine:
        yield engine


async def turn_then_newcomer(engine: Engine, gated: bool) -> list[str]:
    """Three sends share a turn; a request arrives in the loop's turn where their commit
    runs (as one read from a socket meanwhile does). What happened, in order."""
    happened: list[str] = []

    async def send(name: str) -> None:
        await in_turn(engine, insert(engine, name))
        happened.append(f"answer {name}")

    async def newcomer() -> None:
        if gated:
            await after_answers()
        happened.append("new work")

    sends = [asyncio.create_task(send(name)) for name in "abc"]
    await asyncio.sleep(0)  # the sends run and join one turn; its commit comes next
    arrived = asyncio.create_task(newcomer())
    await asyncio.gather(*sends, arrived)
    return happened


def test_a_new_request_starts_after_the_answers_of_a_committed_turn(engine: Engine) -> None:
    happened = asyncio.run(turn_then_newcomer(engine, gated=True))
    assert happened == ["answer a", "answer b", "answer c", "new work"]


def test_without_the_gate_new_work_would_hold_the_answers_back(engine: Engine) -> None:
    """The scenario above is the one the gate is for: ungated, the newcomer runs first."""
    happened = asyncio.run(turn_then_newcomer(engine, gated=False))
    assert happened[0] == "new work"


def test_nothing_is_pending_once_the_sends_have_resumed(engine: Engine) -> None:
    async def scenario() -> list[bool]:
        seen = [answers_pending()]

        async def send(name: str) -> None:
            await in_turn(engine, insert(engine, name))
            seen.append(answers_pending())  # the turn's sends still to resume, if any

        await asyncio.gather(*(send(name) for name in "xyz"))
        seen.append(answers_pending())
        return seen

    assert asyncio.run(scenario()) == [False, True, True, False, False]


def test_a_send_cancelled_before_its_commit_leaves_nothing_pending(engine: Engine) -> None:
    async def scenario() -> bool:
        kept = asyncio.create_task(in_turn(engine, insert(engine, "kept")))
        dropped = asyncio.create_task(in_turn(engine, insert(engine, "dropped")))
        await asyncio.sleep(0)  # both joined the turn
        dropped.cancel()
        await asyncio.gather(kept, dropped, return_exceptions=True)
        await asyncio.sleep(0)
        return answers_pending()

    assert asyncio.run(scenario()) is False


def test_a_turn_ended_by_a_storage_fault_leaves_nothing_pending(engine: Engine) -> None:
    """The fault ends the shared transaction: the send before it answers with the fault
    too (its waiter gets the error), and nothing stays pending."""
    fault = sqlite3.OperationalError("disk I/O error")

    def failing() -> None:
        insert(engine, "b")()
        raise fault

    async def scenario() -> tuple[list[object], bool]:
        results = await asyncio.gather(
            in_turn(engine, insert(engine, "a")), in_turn(engine, failing), return_exceptions=True
        )
        await asyncio.sleep(0)
        return list(results), answers_pending()

    results, pending = asyncio.run(scenario())
    assert results == [fault, fault]
    assert pending is False


def test_answers_that_keep_coming_hold_a_request_back_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(answers_first, "answers_pending", lambda: True)

    async def turns_waited() -> int:
        turns = 0

        async def ticker() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = turns
        await after_answers()
        waited = turns - before
        ticking.cancel()
        return waited

    assert asyncio.run(turns_waited()) == MAX_YIELDS


def test_every_member_app_lets_answers_go_first_inside_its_observed_edge(
    tmp_path: Path,
) -> None:
    """Inside the observed HTTP layer (the wait counts in the access line), before the
    token check (no work of the request's own before the answers)."""
    app = create_app(Settings(**trusted_changes("http://127.0.0.1:9", data_dir=tmp_path)))
    layers = [getattr(middleware.cls, "__name__", "") for middleware in app.user_middleware]
    assert layers.index("ObservedHTTP") < layers.index(AnswersFirst.__name__)
    assert layers.index(AnswersFirst.__name__) < layers.index("TokenFirst")
