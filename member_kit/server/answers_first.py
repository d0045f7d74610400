"""A new request lets the answers of a committed turn go out before it starts its work.

The sends of one turn of the event loop share one commit (:func:`~member_kit.storage.
engine.in_turn`). Each resumes once that commit is made, in the loop's next turn, queued
behind whatever the loop took in meanwhile. A request that arrived then would start its
own work first (its token check, its transaction: about a millisecond each) and hold back
answers that are ready, and a caller waiting on one of them (a coordinator with a
handoff to go on with) would wait too.

:class:`AnswersFirst` sits just inside the observed HTTP layer: while sends of a committed
turn have yet to resume (:func:`~member_kit.storage.engine.answers_pending`), a new
request yields to the loop, so that they answer first; at most :data:`MAX_YIELDS` times,
so that answers that keep coming never hold it back for long. Nothing else changes: the
request then goes through the edge's checks and the app as before, and its access line
counts the time it waited.

Measured with remote_risk of the code before and after in alternating windows (issue 34,
docs/benchmarks.md "Answers before new work"): governed handoffs at 8 in flight, between
a tenth and a fifth more a second; at 32 in flight, where a turn already commits every
eight sends, no change; under figure (1)'s load generator, within the machine's noise.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Receive, Scope, Send

from member_kit.storage.engine import answers_pending

__all__ = ["MAX_YIELDS", "AnswersFirst", "after_answers"]

# Turns of the loop a request gives way for, at most.
MAX_YIELDS = 3


async def after_answers() -> None:
    """Return once the sends of committed turns have resumed to answer, or after
    :data:`MAX_YIELDS` turns of the loop."""
    for _ in range(MAX_YIELDS):
        if not answers_pending():
            return
        await asyncio.sleep(0)


class AnswersFirst:
    """ASGI middleware: each HTTP request to ``app`` starts :func:`after_answers`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and answers_pending():  # mostly not: no wait to make
            await after_answers()
        await self.app(scope, receive, send)
