"""The A2A operations every agent of this service answers the same way.

:class:`TaskOperations` serves ``GetTask``, ``ListTasks``, ``CancelTask`` and
``SubscribeToTask`` from a task store, refuses what an agent does not offer (the extended
card; push notification configs when it has none) and owns the agent's background
workers. An agent subclasses it with how a message opens and works a task
(``SendMessage``, ``SendStreamingMessage``): the risk agent (:mod:`member_kit.server.agent`)
and the conformance fixture (:mod:`tests.conformance_agent`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping

from pydantic import BaseModel, ConfigDict

from contracts.model import Model
from contracts.wire import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from member_kit import errors
from member_kit.server.jsonrpc import (
    ANONYMOUS_OWNER,
    AnyOperation,
    CallContext,
    Operation,
    StreamingOperation,
)
from member_kit.server.push import PushConfigs
from member_kit.server.streams import SUBSCRIPTION_END_STATES, TaskUpdates
from member_kit.tasks.protocol import TaskStoreProtocol
from member_kit.tasks.record import TaskRecord

logger = logging.getLogger(__name__)

# At most this many abandoned tasks are taken over per round.
RESUME_BATCH = 100
PUSH_METHODS = (
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
)


class AnyParams(Model):
    """Params of a method that is refused whatever they are."""

    model_config = ConfigDict(extra="allow")


class TaskOperations:
    def __init__(
        self,
        store: TaskStoreProtocol,
        updates: TaskUpdates,
        push: PushConfigs | None,
        extended_card: AgentCard | None = None,
    ) -> None:
        """Without ``push`` push notification configs are refused (-32003); with it, a
        task's configs go when the store evicts the task. ``extended_card`` (signed) is
        answered to authenticated callers only."""
        self.extended_card = extended_card
        self._store = store
        self._updates = updates
        self._push = push
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._background: asyncio.Task[None] | None = None
        if push is not None:
            store.on_eviction(push.forget)

    def operations(self) -> Mapping[str, AnyOperation]:
        table: dict[str, AnyOperation] = {
            "SendMessage": Operation(SendMessageRequest, self.send_message),
            "SendStreamingMessage": StreamingOperation(
                SendMessageRequest, self.send_streaming_message
            ),
            "SubscribeToTask": StreamingOperation(SubscribeToTaskRequest, self.subscribe),
            "GetTask": Operation(GetTaskRequest, self.get_task),
            "ListTasks": Operation(ListTasksRequest, self.list_tasks),
            "CancelTask": Operation(CancelTaskRequest, self.cancel_task),
            "GetExtendedAgentCard": Operation(GetExtendedAgentCardRequest, self.get_extended_card),
        }
        if self._push is None:
            table.update({name: Operation(AnyParams, _no_push) for name in PUSH_METHODS})
        else:
            table.update(self._push.operations())
        return table

    # --- what each agent does with a message ----------------------------------------------

    async def send_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> SendMessageResponse:
        raise NotImplementedError

    async def send_streaming_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> AsyncIterator[BaseModel]:
        raise NotImplementedError

    # --- the same for every agent ---------------------------------------------------------

    async def subscribe(
        self, request: SubscribeToTaskRequest, context: CallContext
    ) -> AsyncIterator[StreamResponse]:
        """The task as it is now, then its updates; a finished task cannot be followed."""
        record = self._store.get(context.owner, request.id)
        if record.terminal:
            raise errors.UnsupportedOperation(
                f"task {record.id} is {record.state.value}; a finished task has no updates "
                "to subscribe to, read it with GetTask",
                metadata={"taskId": record.id, "state": record.state.value},
            )
        return self._updates.follow(record.snapshot(), until=SUBSCRIPTION_END_STATES)

    async def get_extended_card(
        self, request: GetExtendedAgentCardRequest, context: CallContext
    ) -> AgentCard:
        """The extended card, for a caller the authorizer authenticated (a delegation
        token); the anonymous owner is not one."""
        if self.extended_card is None:
            raise errors.UnsupportedOperation("this agent has no extended agent card")
        if context.owner == ANONYMOUS_OWNER:
            raise errors.UnsupportedOperation(
                "the extended agent card is shown to authenticated callers only"
            )
        return self.extended_card

    async def get_task(self, request: GetTaskRequest, context: CallContext) -> Task:
        record = self._store.get(context.owner, request.id)
        return self._updates.stamp(record.snapshot(request.history_length))

    async def list_tasks(
        self, request: ListTasksRequest, context: CallContext
    ) -> ListTasksResponse:
        return self._store.list(context.owner, request)

    async def cancel_task(self, request: CancelTaskRequest, context: CallContext) -> Task:
        record = self._store.cancel(context.owner, request.id)
        self._changed(record)
        worker = self._workers.get(record.id)
        if worker is not None:
            worker.cancel()
        return self._updates.stamp(record.snapshot())

    async def cancel_owned(self, owner: str) -> list[str]:
        """Cancel every unfinished task of ``owner`` (its grant was revoked): the ids of
        those it cancelled."""
        cancelled: list[str] = []
        token: str | None = None
        while True:
            page = self._store.list(owner, ListTasksRequest(page_size=100, page_token=token))
            for task in page.tasks:
                try:
                    await self.cancel_task(CancelTaskRequest(id=task.id), CallContext(owner))
                except errors.A2AError:  # finished meanwhile: nothing left to stop
                    continue
                cancelled.append(task.id)
            if not page.next_page_token:
                return cancelled
            token = page.next_page_token

    def start_background(self) -> None:
        """Keep this process's work leases and resume unfinished tasks whose lease ran out
        (left by a process that died, this one's predecessor included), now and every
        third of a lease; see :mod:`member_kit.tasks.leases`."""
        if self._background is None:
            self._background = asyncio.create_task(self._keep_working())

    async def aclose(self) -> None:
        """Stop background work (on shutdown); tasks left unfinished stay as they are, and
        their leases are given back so that another process resumes them at once."""
        tasks = list(self._workers.values())
        if self._background is not None:
            tasks.append(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._background is not None:
            self._background = None
            _logged(self._store.release)

    async def _keep_working(self) -> None:
        while True:
            try:
                await self._keep_leases()
            except Exception:  # e.g. the database unreachable: tried again next round
                logger.exception("background step _keep_leases failed; trying again later")
            await asyncio.sleep(self._store.lease_seconds / 3)

    async def _keep_leases(self) -> None:
        """Renew this process's leases, stop working tasks another process took over, and
        resume the unfinished tasks nobody holds any longer (the database work off the
        event loop)."""
        store = self._store
        working = {task_id for task_id, worker in self._workers.items() if not worker.done()}
        taken = await store.run_transaction(lambda: store.renew(working))
        for task_id, worker in list(self._workers.items()):
            if task_id in taken and not worker.done():
                logger.warning("task %s was taken over by another process", task_id)
                worker.cancel()
        for record in await store.run_transaction(lambda: store.take_over(RESUME_BATCH)):
            logger.info(
                "resuming task %s (%s), left by a stopped process", record.id, record.state.value
            )
            self.resume_work(record)

    def resume_work(self, record: TaskRecord) -> None:
        """Work again on an unfinished task this process now leases; an agent whose work
        cannot be resumed ends it with a definite state."""
        raise NotImplementedError

    def _changed(self, record: TaskRecord) -> None:
        """Tell streams and webhooks the task's new status (if any listen)."""
        if self._updates.heard(record.owner, record.id):
            self._updates.status(record.owner, record.snapshot())


def _logged(step: Callable[[], None]) -> None:
    """Run a background step; a failure (e.g. the database unreachable) is logged and the
    step is tried again on the next round, never left as an unobserved exception."""
    try:
        step()
    except Exception:
        logger.exception("background step %s failed; trying again later", step.__name__)


async def _no_push(params: AnyParams, context: CallContext) -> BaseModel:
    raise errors.PushNotificationNotSupported("push notifications are not supported by this agent")
