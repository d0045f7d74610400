"""Following a remote task by its updates: streamed, pushed or polled, judged the same way.

* :class:`ArtifactAssembler` puts chunked artifacts together (``append``, ``lastChunk``);
  an artifact counts only once its last chunk arrived, and the total size of what is
  being assembled is capped while it arrives.
* :class:`TaskView` folds ``StreamResponse`` events into the ``Task`` they describe, so
  the wait loop observes a Task whichever way the news came.
* :class:`RemoteUpdates` hands the wait loop its next observation of the remote task
  within the time it may still wait. With an event source (SSE from ``SubscribeToTask``
  when the card says the agent streams, or a push receiver's inbox) it reads events; a
  state that settles the task is confirmed with ``GetTask`` before it is returned (not
  for an SSE response to our own call, which is the remote's own answer already, unless
  it settles with an artifact whose last chunk never came), and a
  source that ends or fails before the task settles is followed by ``GetTask`` and then
  by polling. Without a source it polls ``GetTask`` with backoff, and never more often
  than the client's poll budget allows (``ClientLimits.max_polls_per_second``) shared
  among every task it follows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts import strict_json
from contracts.wire import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    Artifact,
    GetTaskRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    to_wire,
)
from coordinator.errors import ArtifactTooLarge, FederationError, ProtocolError
from coordinator.remote.wire.bindings import transport_of
from coordinator.remote.wire.client import A2AClient
from coordinator.remote.wire.transport import Transport

DEFAULT_MAX_ARTIFACT_BYTES = 1_000_000
STREAM_END_GRACE_SECONDS = 0.05
# A wait for the next update longer than this is one an operator may look into: the facts
# gathered so far are written (see RemoteUpdates.next). A remote that answers within it
# costs no write while it works.
IDLE_SECONDS = 0.25
EventSource = Callable[[], AsyncIterator[StreamResponse]]
Idle = Callable[[], Awaitable[None]]


def _size(artifact: Artifact) -> int:
    return len(strict_json.dumps(to_wire(artifact)))


class ArtifactAssembler:
    """Chunks in, complete artifacts out; at most ``max_bytes`` held for one task."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES) -> None:
        self._max = max_bytes
        self._pending: dict[str, Artifact] = {}
        self.complete: dict[str, Artifact] = {}

    def add(self, update: TaskArtifactUpdateEvent) -> Artifact | None:
        """Take one artifact update; the whole artifact once its last chunk is in."""
        artifact = update.artifact
        key = artifact.artifact_id
        earlier = self._pending.get(key) or self.complete.get(key)
        if update.append and earlier is not None:
            parts = [*earlier.parts, *artifact.parts]
            artifact = earlier.model_copy(update={"parts": parts})
        self._pending.pop(key, None)
        self.complete.pop(key, None)
        if self._held() + _size(artifact) > self._max:
            raise ArtifactTooLarge(f"artifacts of the task exceed {self._max} bytes")
        if update.last_chunk is False:
            self._pending[key] = artifact
            return None
        self.complete[key] = artifact
        return artifact

    @property
    def unfinished(self) -> bool:
        """Whether an artifact is still waiting for its last chunk."""
        return bool(self._pending)

    def _held(self) -> int:
        return sum(_size(a) for a in [*self._pending.values(), *self.complete.values()])


class TaskView:
    """The remote task as the events so far describe it (only complete artifacts)."""

    def __init__(self, task: Task, max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES) -> None:
        self.task = task
        self._artifacts = ArtifactAssembler(max_artifact_bytes)
        for artifact in task.artifacts or []:
            self._artifacts.complete[artifact.artifact_id] = artifact

    def apply(self, event: StreamResponse) -> Task:
        """Fold one event in; events about another task are refused."""
        if event.task_id is not None and event.task_id != self.task.id:
            raise ProtocolError(f"an update names task {event.task_id}, not {self.task.id}")
        if event.task is not None:
            self.task = event.task
            for artifact in event.task.artifacts or []:
                self._artifacts.complete[artifact.artifact_id] = artifact
        elif event.status_update is not None:
            update: dict[str, Any] = {"status": event.status_update.status}
            receipt = (event.status_update.metadata or {}).get(RECEIPTS_EXTENSION_URI)
            if receipt is not None:  # the receipts extension: the final event carries it
                update["metadata"] = {**(self.task.metadata or {}), RECEIPTS_EXTENSION_URI: receipt}
            self.task = self.task.model_copy(update=update)
        elif event.artifact_update is not None and self._artifacts.add(event.artifact_update):
            artifacts = list(self._artifacts.complete.values())
            self.task = self.task.model_copy(update={"artifacts": artifacts})
        return self.task

    @property
    def settled(self) -> bool:
        state = self.task.status.state
        return state in TERMINAL_TASK_STATES or state in INTERRUPTED_TASK_STATES

    @property
    def unfinished(self) -> bool:
        """An artifact the stream began but never finished (no last chunk came)."""
        return self._artifacts.unfinished


@dataclass(frozen=True)
class PollBackoff:
    first: float = 0.05
    max: float = 1.0


class RemoteUpdates:
    """The next observation of one remote task, never waiting longer than asked."""

    def __init__(
        self,
        client: A2AClient,
        endpoint: str | Transport,
        task: Task,
        headers: dict[str, str],
        *,
        source: EventSource | None = None,
        backoff: PollBackoff | None = None,
        notes: list[str] | None = None,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
        on_release: Callable[[], None] | None = None,
        confirm_settled: bool = True,
    ) -> None:
        """``confirm_settled=False`` takes a settling event from ``source`` as the
        remote's own answer (the source is the response to our own authenticated call);
        otherwise, and always for a source such as a push inbox, a settled state is asked
        for again with GetTask."""
        self._on_release = on_release
        self._confirm_settled = confirm_settled
        self._reading: asyncio.Future[StreamResponse | None] | None = None
        self._client = client
        # The agent's interface (a bare URL is a JSON-RPC v1.0 endpoint), whatever binding.
        self._remote = transport_of(client, endpoint)
        self._headers = headers
        self._source = source
        self._backoff = backoff or PollBackoff()
        self._delay = self._backoff.first
        self._view = TaskView(task, max_artifact_bytes)
        self._events: AsyncIterator[StreamResponse] | None = None
        self._polling = False
        self.notes = notes if notes is not None else []
        if source is None:
            self._start_polling()

    @classmethod
    def streaming(
        cls,
        client: A2AClient,
        endpoint: str | Transport,
        task: Task,
        headers: dict[str, str],
        *,
        notes: list[str] | None = None,
        on_release: Callable[[], None] | None = None,
    ) -> RemoteUpdates:
        """Updates read from ``SubscribeToTask`` (for an agent whose card says it streams);
        ``on_release`` is called once when the stream is given up or closed."""

        remote = transport_of(client, endpoint)

        def subscribe() -> AsyncIterator[StreamResponse]:
            return remote.subscribe(task.id, headers)

        return cls(
            client,
            remote,
            task,
            headers,
            source=subscribe,
            notes=notes,
            on_release=on_release,
            confirm_settled=False,
        )

    async def next(self, within: float, on_idle: Idle | None = None) -> Task:
        """The task as next observed; the last known view if ``within`` passes first.

        ``on_idle`` is awaited once the wait turns out not to be short: after
        :data:`IDLE_SECONDS` without an event, or before a poll's sleep of at least that
        long. The dispatch loop writes its pending facts there, so a quick run of updates
        costs no write until the end, and a long wait never holds facts back."""
        if self._source is not None:
            return await self._next_event(within, on_idle)
        pause = min(self._delay, max(0.0, within))
        if on_idle is not None and pause >= IDLE_SECONDS:
            await on_idle()
        await asyncio.sleep(pause)
        ceiling = max(self._backoff.max, self._client.poll_interval_floor())
        self._delay = min(self._delay * 2, ceiling)
        return await self.confirm()

    async def confirm(self) -> Task:
        """Ask the remote agent with ``GetTask``; on failure keep the last known view."""
        try:
            task = await self._remote.get_task(GetTaskRequest(id=self._view.task.id), self._headers)
        except FederationError as exc:
            self.notes.append(f"poll failed: {exc}")
            return self._view.task
        self._view = TaskView(task)
        return task

    async def _next_event(self, within: float, on_idle: Idle | None) -> Task:
        assert self._source is not None
        if self._events is None:
            self._events = self._source()
        try:
            event = await self._event_within(max(0.001, within), on_idle)
            if event is None:
                await self._give_up_source("the update stream ended before the task settled")
                return await self.confirm()
            self._view.apply(event)
        except TimeoutError:
            await self._give_up_source("no update in time")
            return self._view.task
        except FederationError as exc:
            await self._give_up_source(f"update stream failed: {exc}")
            return await self.confirm()
        if self._view.settled:
            await self._read_to_end()
            await self.aclose()
            # A stream that settles with an artifact still open (an agent that marks a
            # whole artifact ``lastChunk: false``) is not the whole answer: ask GetTask.
            confirm = self._confirm_settled or self._view.unfinished
            return await self.confirm() if confirm else self._view.task
        return self._view.task

    async def _event_within(self, within: float, on_idle: Idle | None) -> StreamResponse | None:
        """The next event (None at the end of the stream), calling ``on_idle`` if none
        came within :data:`IDLE_SECONDS`. The read is not cancelled by that pause."""
        assert self._events is not None
        if self._reading is None:
            self._reading = asyncio.ensure_future(_next_or_end(self._events))
        reading = self._reading
        patience = min(within, IDLE_SECONDS) if on_idle is not None else within
        done, _ = await asyncio.wait({reading}, timeout=patience)
        if not done and on_idle is not None:
            started = time.monotonic()
            await on_idle()
            left = within - patience - (time.monotonic() - started)
            done, _ = await asyncio.wait({reading}, timeout=max(0.0, left))
        if not done:
            raise TimeoutError
        self._reading = None
        return reading.result()

    async def _read_to_end(self) -> None:
        """A server ends the stream after the event that settles the task; reading up to
        that end (briefly) lets the connection go back to the pool instead of being cut."""
        try:
            event = await self._event_within(STREAM_END_GRACE_SECONDS, None)
            if event is not None:
                self._view.apply(event)
        except TimeoutError:
            pass
        except FederationError as exc:
            self.notes.append(f"after the task settled the stream failed: {exc}")

    async def _give_up_source(self, why: str) -> None:
        self.notes.append(f"{why}; polling instead")
        await self.aclose()
        self._source = None
        self._start_polling()

    def _start_polling(self) -> None:
        if not self._polling:
            self._polling = True
            self._client.start_polling()

    async def aclose(self) -> None:
        if self._polling:
            self._polling = False
            self._client.stop_polling()
        reading, self._reading = self._reading, None
        if reading is not None and not reading.done():
            reading.cancel()
            await asyncio.wait({reading})
        events, self._events = self._events, None
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
        release, self._on_release = self._on_release, None
        if release is not None:
            release()


async def _next_or_end(events: AsyncIterator[StreamResponse]) -> StreamResponse | None:
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None


def updates_for(
    client: A2AClient,
    endpoint: str | Transport,
    task: Task,
    headers: dict[str, str],
    *,
    streams: bool,
    backoff: PollBackoff,
    notes: list[str],
) -> RemoteUpdates:
    """Streamed updates when the agent's card says it streams and the client has a stream
    slot free (streams hold a connection each, so they are bounded), else polling."""
    if streams and client.open_stream_slot():
        return RemoteUpdates.streaming(
            client, endpoint, task, headers, notes=notes, on_release=client.close_stream_slot
        )
    return RemoteUpdates(client, endpoint, task, headers, backoff=backoff, notes=notes)
