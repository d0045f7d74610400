"""Push notification configs: the four A2A operations and the notifier that uses them.

Configs belong to a task and to the caller that owns it: every operation first reads the
task under the caller's owner (another owner's task is not found), so a config can only
be seen, listed, replaced or deleted by whoever may read its task. A config's URL is
checked by the :class:`~member_kit.server.webhooks.WebhookPolicy` when it is created and again
before each delivery. Bounds: at most ``per_task`` configs per task and ``capacity`` in
all; the configs of a task go when the task leaves the store's reach (see :meth:`forget`).

``Create`` with an ``id`` that exists replaces that config; ``Delete`` of a config that
is already gone succeeds (deleting is idempotent); ``Get`` of an unknown id is -32001.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from contracts import a2a_errors
from contracts.wire import (
    Empty,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskPushNotificationConfigRequest,
)
from member_kit import errors
from member_kit.server.jsonrpc import CallContext, Operation
from member_kit.server.webhooks import Notification, PushDelivery

TaskLookup = Callable[[str, str], object]
"""``(owner, task_id)``: raises TaskNotFound unless the owner may read the task."""

DEFAULT_PER_TASK = 10
DEFAULT_CAPACITY = 10_000


class PushConfigNotFound(errors.A2AError):
    default_kind = a2a_errors.TASK_NOT_FOUND

    def __init__(self, task_id: str, config_id: str) -> None:
        super().__init__(
            f"task {task_id} has no push notification config {config_id}",
            metadata={"taskId": task_id, "configId": config_id},
        )


class PushConfigs:
    """The configs of every task, by ``(owner, task_id)`` then config id."""

    def __init__(
        self,
        lookup: TaskLookup,
        delivery: PushDelivery,
        *,
        per_task: int = DEFAULT_PER_TASK,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        self._lookup = lookup
        self.delivery = delivery
        self._per_task = per_task
        self._capacity = capacity
        self._configs: dict[tuple[str, str], dict[str, TaskPushNotificationConfig]] = {}

    def operations(self) -> Mapping[str, Operation[Any]]:
        return {
            "CreateTaskPushNotificationConfig": Operation(TaskPushNotificationConfig, self.create),
            "GetTaskPushNotificationConfig": Operation(TaskPushNotificationConfigRequest, self.get),
            "ListTaskPushNotificationConfigs": Operation(
                ListTaskPushNotificationConfigsRequest, self.list
            ),
            "DeleteTaskPushNotificationConfig": Operation(
                TaskPushNotificationConfigRequest, self.delete
            ),
        }

    # --- operations -------------------------------------------------------------------------

    async def create(
        self, config: TaskPushNotificationConfig, context: CallContext
    ) -> TaskPushNotificationConfig:
        if not config.task_id:
            raise errors.InvalidParams("params.taskId: the task the config is for is required")
        await self.delivery.policy.target(config.url)  # a name is resolved and checked too
        return self.register(context.owner, config.task_id, config)

    async def get(
        self, request: TaskPushNotificationConfigRequest, context: CallContext
    ) -> TaskPushNotificationConfig:
        found = self._of(context.owner, request.task_id).get(request.id)
        if found is None:
            raise PushConfigNotFound(request.task_id, request.id)
        return found

    async def list(
        self, request: ListTaskPushNotificationConfigsRequest, context: CallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        configs = list(self._of(context.owner, request.task_id).values())
        return ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token="")

    async def delete(
        self, request: TaskPushNotificationConfigRequest, context: CallContext
    ) -> Empty:
        self._of(context.owner, request.task_id).pop(request.id, None)
        return Empty()

    # --- for the handler ------------------------------------------------------------------

    def register(
        self, owner: str, task_id: str, config: TaskPushNotificationConfig
    ) -> TaskPushNotificationConfig:
        """Check and keep ``config`` for the owner's task (inline or created)."""
        self.delivery.policy.check_syntax(config.url)
        self._lookup(owner, task_id)
        configs = self._configs.setdefault((owner, task_id), {})
        config_id = config.id or str(uuid.uuid4())
        if config_id not in configs:
            if len(configs) >= self._per_task:
                raise errors.InvalidParams(
                    f"task {task_id} already has {self._per_task} push notification configs"
                )
            if sum(len(each) for each in self._configs.values()) >= self._capacity:
                raise errors.InternalError("no room for another push notification config")
        stored = config.model_copy(update={"id": config_id, "task_id": task_id})
        configs[config_id] = stored
        return stored

    def notify(self, owner: str, task_id: str, event: StreamResponse) -> None:
        """Queue ``event`` for every webhook of the task; never waits."""
        for config in self._configs.get((owner, task_id), {}).values():
            self.delivery.enqueue(Notification(config=config, task_id=task_id, event=event))

    def notifies(self, owner: str, task_id: str) -> bool:
        return bool(self._configs.get((owner, task_id)))

    def forget(self, owner: str, task_id: str) -> None:
        self._configs.pop((owner, task_id), None)

    def _of(self, owner: str, task_id: str) -> dict[str, TaskPushNotificationConfig]:
        self._lookup(owner, task_id)
        return self._configs.get((owner, task_id), {})
