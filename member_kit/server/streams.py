"""Fan-out of task updates to live streams: ``SendStreamingMessage`` and ``SubscribeToTask``.

A :class:`TaskEventBroker` keeps, per task, the subscribers that are listening now. The
handler publishes every change of a task (through :class:`TaskUpdates`) as a
``StreamResponse``; each subscriber gets every event, in the order published, in its own
bounded queue. Each stream ends at the states it was opened for: a ``SendStreamingMessage``
stream once the task is terminal or interrupted (the caller has to answer), a
``SubscribeToTask`` stream once it is terminal (an interrupted task may be continued by
another caller's message, and the subscriber sees that happen).

Bounds: at most ``max_subscribers`` listen to one task, and each subscriber holds at most
``queue_limit`` undelivered events. A subscriber that falls further behind is cut off
(:class:`SubscriberLagged`); nobody else waits for it, and closing one stream never
affects another stream or the task. There is no replay: a subscriber sees the task as it
is when it subscribes, then what happens afterwards (A2A v1.0 has no resume cursor).

The broker knows nothing of storage; it only carries events, so the task store can be
replaced without touching it.

While a task works in silence, a stream still sends something: an SSE comment line
(:data:`KEEP_ALIVE`) every :data:`KEEP_ALIVE_SECONDS` without an event
(:func:`kept_alive`). SSE readers skip comments (the coordinator's, httpx-sse's), and a
client or proxy that gives up on a connection idle for a few seconds (the a2a-sdk's own
httpx client waits 5 s for a read) keeps the stream of a task that takes longer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractContextManager, suppress
from contextvars import ContextVar, Token
from typing import Protocol, TypeVar

from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    Artifact,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from member_kit import errors

logger = logging.getLogger(__name__)

DEFAULT_QUEUE_LIMIT = 256
DEFAULT_MAX_SUBSCRIBERS = 32
SETTLED_STATES = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
# Where a SubscribeToTask stream ends (a SendStreamingMessage stream ends at SETTLED_STATES).
SUBSCRIPTION_END_STATES = TERMINAL_TASK_STATES
# An SSE comment, sent when a stream has been quiet this long (below the 5 s read timeout
# of httpx's default client, which the a2a-sdk uses unless given another).
KEEP_ALIVE = b": keep-alive\n\n"
KEEP_ALIVE_SECONDS = 2.0
Event = TypeVar("Event")


class SubscriberLagged(errors.InternalError):
    """A subscriber fell more than its queue behind and was cut off; read the task instead."""

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"the stream of task {task_id} fell behind and was closed; read it with GetTask",
            metadata={"taskId": task_id},
        )


class Subscription:
    """One listener's queue of events for one task; iterate it, close it when done."""

    def __init__(
        self,
        task_id: str,
        limit: int,
        on_close: Callable[[Subscription], None],
        until: frozenset[TaskState] = SETTLED_STATES,
    ) -> None:
        self.task_id = task_id
        self.until = until
        self._limit = limit
        self._on_close = on_close
        self._events: deque[StreamResponse] = deque()
        self._ready = asyncio.Event()
        self._ended = False
        self._lagged = False

    def offer(self, event: StreamResponse) -> bool:
        """Queue ``event``; False (and the subscription cut off) if the queue is full."""
        if self._ended:
            return False
        if len(self._events) >= self._limit:
            self._lagged = True
            self.end()
            return False
        self._events.append(event)
        self._ready.set()
        update = event.status_update
        if update is not None and update.status.state in self.until:
            self.end()
        return True

    @property
    def ended(self) -> bool:
        return self._ended

    def end(self) -> None:
        """No more events will come; what is queued is still delivered."""
        self._ended = True
        self._ready.set()

    def close(self) -> None:
        """Stop listening (the reader is gone); idempotent."""
        self.end()
        self._events.clear()
        self._on_close(self)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> StreamResponse:
        while True:
            if self._lagged:
                raise SubscriberLagged(self.task_id)
            if self._events:
                return self._events.popleft()
            if self._ended:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()


class TaskEventBroker:
    """Per-task subscriber lists; publishing never waits for any subscriber."""

    def __init__(
        self,
        *,
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
    ) -> None:
        if queue_limit < 1 or max_subscribers < 1:
            raise ValueError("queue_limit and max_subscribers must be at least 1")
        self._queue_limit = queue_limit
        self._max_subscribers = max_subscribers
        self._subscribers: dict[str, list[Subscription]] = {}

    def subscribe(self, task_id: str, until: frozenset[TaskState] = SETTLED_STATES) -> Subscription:
        listening = self._subscribers.setdefault(task_id, [])
        if len(listening) >= self._max_subscribers:
            raise errors.UnsupportedOperation(
                f"task {task_id} already has {self._max_subscribers} open streams; "
                "close one or poll with GetTask",
                metadata={"taskId": task_id},
            )
        subscription = Subscription(task_id, self._queue_limit, self._remove, until)
        listening.append(subscription)
        return subscription

    def publish(self, task_id: str, event: StreamResponse) -> None:
        """Give ``event`` to every subscriber of the task; a stream whose end state the event
        reports gets it as its last event."""
        for subscription in list(self._subscribers.get(task_id, ())):
            if not subscription.offer(event):
                logger.warning("a subscriber of task %s fell behind and was cut off", task_id)
            if subscription.ended:
                self._remove(subscription)

    def subscriber_count(self, task_id: str) -> int:
        return len(self._subscribers.get(task_id, ()))

    def _remove(self, subscription: Subscription) -> None:
        listening = self._subscribers.get(subscription.task_id)
        if listening is None:
            return
        if subscription in listening:
            listening.remove(subscription)
        if not listening:
            del self._subscribers[subscription.task_id]


def _as_is(task: Task) -> Task:
    return task


# --- the events -----------------------------------------------------------------------------


def task_event(task: Task) -> StreamResponse:
    return StreamResponse(task=task)


def status_event(task: Task) -> StreamResponse:
    """The status of ``task`` as a ``statusUpdate`` event, carrying its receipt (the
    receipts extension's metadata) when it has one."""
    extension = (task.metadata or {}).get(RECEIPTS_EXTENSION_URI)
    update = TaskStatusUpdateEvent(
        task_id=task.id,
        context_id=task.context_id or "",
        status=task.status,
        metadata={RECEIPTS_EXTENSION_URI: extension} if extension else None,
    )
    return StreamResponse(status_update=update)


def artifact_event(
    task: Task, artifact: Artifact, *, append: bool | None = None, last_chunk: bool | None = None
) -> StreamResponse:
    update = TaskArtifactUpdateEvent(
        task_id=task.id,
        context_id=task.context_id or "",
        artifact=artifact,
        append=append,
        last_chunk=last_chunk,
    )
    return StreamResponse(artifact_update=update)


# An update kept back by TaskUpdates.held: the task's owner, its id and the event (or the
# task whose status event it is, built when it is published: outside the transaction).
_Update = tuple[str, str, StreamResponse | Task]


class Notifier(Protocol):
    """Someone else told of every update (push notifications), by the task's owner."""

    def notify(self, owner: str, task_id: str, event: StreamResponse) -> None: ...

    def notifies(self, owner: str, task_id: str) -> bool:
        """Whether :meth:`notify` would tell anyone about this task."""
        ...


class TaskUpdates:
    """What a handler calls after every change of a task: streams, then push, in order."""

    def __init__(
        self,
        broker: TaskEventBroker,
        notifier: Notifier | None = None,
        stamp: Callable[[Task], Task] | None = None,
    ) -> None:
        """``stamp`` is applied to every task snapshot published (a terminal task gets
        its receipt, :mod:`member_kit.audit.receipts`)."""
        self.broker = broker
        self._notifier = notifier
        self.stamp: Callable[[Task], Task] = stamp or _as_is
        self._held: ContextVar[list[_Update] | None] = ContextVar(
            f"remote_risk_held_updates_{id(self)}", default=None
        )

    def held(self) -> AbstractContextManager[None]:
        """Keep back the updates published inside, and publish them in order once the block
        ends without an error: wrapped around a store transaction, nothing is announced
        that was not stored. On an error they are dropped. Nested blocks join the outer."""
        return _Holding(self)

    def heard(self, owner: str, task_id: str) -> bool:
        """Whether an update of the task reaches anyone (a stream or a webhook) now; when
        it does not, a caller may skip building it."""
        if self.broker.subscriber_count(task_id):
            return True
        return self._notifier is not None and self._notifier.notifies(owner, task_id)

    def status(self, owner: str, task: Task) -> None:
        """The task's status changed (which may end streams)."""
        self._publish(owner, task.id, task)

    def artifact(
        self,
        owner: str,
        task: Task,
        artifact: Artifact,
        *,
        append: bool | None = None,
        last_chunk: bool | None = None,
    ) -> None:
        event = artifact_event(task, artifact, append=append, last_chunk=last_chunk)
        self._publish(owner, task.id, event)

    def _publish(self, owner: str, task_id: str, update: StreamResponse | Task) -> None:
        held = self._held.get()
        if held is not None:
            held.append((owner, task_id, update))
            return
        event = status_event(self.stamp(update)) if isinstance(update, Task) else update
        self.broker.publish(task_id, event)
        if self._notifier is not None:
            self._notifier.notify(owner, task_id, event)

    def follow(
        self, task: Task, until: frozenset[TaskState] = SETTLED_STATES
    ) -> AsyncIterator[StreamResponse]:
        """A stream of ``task``: subscribed now, it yields ``task`` first, then every update
        until the task reaches a state in ``until``. Call it before the work that changes
        the task starts, so that no update falls between the snapshot and the stream."""
        if task.status.state in until:
            return _only(self.stamp(task))
        return _stream(task, self.broker.subscribe(task.id, until))


async def _only(task: Task) -> AsyncIterator[StreamResponse]:
    yield task_event(task)


async def _stream(task: Task, subscription: Subscription) -> AsyncIterator[StreamResponse]:
    try:
        yield task_event(task)
        async for event in subscription:
            yield event
    finally:
        subscription.close()


async def kept_alive(
    events: AsyncIterator[Event], every: float = KEEP_ALIVE_SECONDS
) -> AsyncGenerator[Event | None, None]:
    """Each of ``events``, and None each time ``every`` seconds pass without one (the
    caller sends :data:`KEEP_ALIVE` then). The wait for the next event goes on across
    those pauses, never cancelled by them; an error of ``events`` is raised here.
    Closing this closes ``events`` too (after the wait for its next event is cancelled:
    a generator cannot be closed while it runs)."""
    waiting: asyncio.Future[Event] | None = None
    try:
        while True:
            if waiting is None:
                waiting = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({waiting}, timeout=every)
            if not done:
                yield None
                continue
            try:
                event = waiting.result()
            except StopAsyncIteration:
                return
            waiting = None
            yield event
    finally:
        if waiting is not None:  # the stream was closed while waiting for an event
            waiting.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await waiting
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


class _Holding:
    """:meth:`TaskUpdates.held`'s block (a class: it is entered on every send)."""

    __slots__ = ("_held", "_token", "_updates")

    def __init__(self, updates: TaskUpdates) -> None:
        self._updates = updates

    def __enter__(self) -> None:
        held = self._updates._held
        if held.get() is not None:  # nested: the outer block publishes
            self._token: Token[list[_Update] | None] | None = None
            return
        self._held: list[_Update] = []
        self._token = held.set(self._held)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._token is None:
            return
        self._updates._held.reset(self._token)
        if kind is None:
            for owner, task_id, event in self._held:
                self._updates._publish(owner, task_id, event)
