"""A new request lets the answers of a committed turn go out before it starts its work.

The sends of one turn of the event loop share one commit (:func:`~member_kit.storage.
engine.in_turn`); each answers once that commit is made, in the loop's next turn. uvloop
writes what a turn of the loop gave a socket when the turn ends, after every callback in
it. So a request that arrived meanwhile and starts in the same turn (its token check,
its transaction: about a millisecond) holds back answers that are ready, and a caller
waiting on one of them (a coordinator with a handoff to go on with) waits too.

:class:`AnswersFirst` sits just inside the observed HTTP layer: while sends of a committed
turn are answering (:func:`~member_kit.storage.engine.answers_pending`), a new request
yields to the loop, at most :data:`MAX_YIELDS` times, so that the turn in which those
answers are written ends first. Nothing else changes: the request then goes through the
edge's checks and the app as before, and its access line counts the time it waited.

Measured with remote_risk of the code before and after in the same rounds (issue 34,
docs/benchmarks.md "Answers before new work"): governed handoffs at 8 in flight, 468
against 395 a second (4 windows each; 438 against 390 in a first build); at 32 in
flight, where a turn already commits every eight sends, 514 against 517. Under figure
(1)'s load generator the change is within this machine's noise (at 32 in flight one
A/B read 5% fewer sends a second, the next 10% more).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send

from member_kit.storage.engine import answers_pending

__all__ = ["MAX_YIELDS", "AnswersFirst", "after_answers"]

# Turns of the loop a request gives way for: the answers' own turn, and the turn in which
# their sends resume (answers that keep coming never hold a request back for longer).
MAX_YIELDS = 3


async def after_answers() -> None:
    """Return once the answers of committed turns are written, or after :data:`MAX_YIELDS`
    turns of the loop."""
    for _ in range(MAX_YIELDS):
        if not answers_pending():
            return
        await asyncio.sleep(0)


class AnswersFirst:
    """ASGI middleware: each HTTP request to ``app`` starts :func:`after_answers`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await after_answers()
        await self.app(scope, receive, send)
