"""The operations the guard serves, each forwarded to the upstream once authorized.

It is an :class:`~member_kit.server.jsonrpc.OperationTable`, so the kit's endpoint
(JSON-RPC and HTTP+JSON, one dispatcher) runs the kit's authorizer before any of it. Then:

* ``SendMessage``: a send retried under the idempotency key of a task the caller opened
  is answered with that task (GetTask upstream), as the kit's handler does; a
  continuation must name a task of the caller's (else TaskNotFound); a new task's
  delegation token is claimed (one token, one task) before the upstream is asked, so a
  replayed token never reaches it. The upstream's task is kept as the caller's with the
  handoff binding and what the token binds (:mod:`.tasks`);
* ``GetTask``, ``CancelTask``: only for a task of the caller's, else TaskNotFound
  without asking the upstream;
* ``ListTasks``: the caller's tasks, each read from the upstream (GetTask), filtered by
  context and state and paged by the guard, without receipts (as the kit lists them);
* a send asking for push notifications is refused (PushNotificationNotSupported): the
  upstream would call the webhook itself, past the guard.

Every task that goes back carries in its metadata the handoff binding and what the token
binds (the upstream never echoes them; what it says under those keys is replaced), and,
when terminal, the receipt the kit's issuer signs over exactly the task returned.

With a database, a send that opens a task makes two writes (:meth:`TaskOwners.transaction`).
Before the upstream is asked: the idempotency key looked up and, unless it names a task
already, the token's claim, the grant watched and the decision-log entries taken so far
(:meth:`~member_kit.audit.log.DecisionLedger.append_waiting`, queued again if this write
rolls back), committed, so a replayed token never reaches the upstream. A claim refused
is refused as it says; when the write itself fails, the lookup and the claim are made
again alone (the claim refused then as its own, ``replay_guard_unavailable``, and so is
a token found used by then, which the failed write may have claimed itself). After: the
task kept as the caller's with its receipt's log entry and head, so no receipt is logged
for a task the guard does not keep, nor a task kept without its receipt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent_cards.transparency.receipts import RECEIPTS_EXTENSION_URI
from contracts import a2a_errors
from contracts.wire import (
    CancelTaskRequest,
    GetTaskRequest,
    JSONObject,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    to_wire,
)
from member_kit import errors
from member_kit.audit.log import DecisionLedger, heads_after_commit
from member_kit.guard.tasks import TaskOwners
from member_kit.guard.upstream import MALFORMED, Model
from member_kit.server.jsonrpc import AnyOperation, CallContext, Operation
from member_kit.server.messages import HANDOFF_BINDING_KEYS, idempotency_key_of, opened_metadata

_OURS = (*HANDOFF_BINDING_KEYS, RECEIPTS_EXTENSION_URI)
# ListTasks reads at most this many of the caller's tasks (one token opens one task, so
# an owner, a principal's handoff, has few), each from the upstream.
MAX_LISTED = 100
DEFAULT_PAGE_SIZE = 50

logger = logging.getLogger(__name__)


class Agent(Protocol):
    """The agent governed: the guard's :class:`~.upstream.Upstream` over HTTP, or the
    in-process adapter of :mod:`member_kit.sdk`; an A2A error it answers passes on."""

    async def call(self, method: str, params: JSONObject, result_type: type[Model]) -> Model: ...

    async def aclose(self) -> None: ...


class ForwardingHandler:
    """Forwards the authorized calls to ``upstream``; ``stamp`` signs terminal tasks; a
    token's claim takes along the decisions waiting to be written to ``audit_log``."""

    def __init__(
        self,
        upstream: Agent,
        tasks: TaskOwners,
        stamp: Callable[[Task], Task],
        audit_log: DecisionLedger | None = None,
    ) -> None:
        self._upstream = upstream
        self.tasks = tasks
        self._stamp = stamp
        self._audit_log = audit_log

    def operations(self) -> Mapping[str, AnyOperation]:
        return {
            "SendMessage": Operation(SendMessageRequest, self.send_message),
            "GetTask": Operation(GetTaskRequest, self.get_task),
            "CancelTask": Operation(CancelTaskRequest, self.cancel_task),
            "ListTasks": Operation(ListTasksRequest, self.list_tasks),
        }

    async def send_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> SendMessageResponse:
        _check_no_push(request)
        continued = request.message.task_id
        if continued is not None:  # a continuation: of a task of the caller's, else not found
            metadata, key = self.tasks.get(context.owner, continued).metadata, None
        else:
            metadata = opened_metadata(request.message, context) or {}
            key = idempotency_key_of(request.message)
            opened = self._opened_else_claimed(context, key)
            if opened is not None:  # a retried send: the task it opened, nothing sent again
                task = await self._task("GetTask", {"id": opened}, context)
                return SendMessageResponse(task=task)
        answer = await self._upstream.call("SendMessage", to_wire(request), SendMessageResponse)
        if answer.task is None:
            return answer
        # the task kept as the caller's and its receipt logged: one write
        with heads_after_commit(), self.tasks.transaction():
            self.tasks.remember(answer.task.id, context.owner, metadata, key)
            returned = self._returned(answer.task, metadata)
        return SendMessageResponse(task=returned)

    def _opened_else_claimed(self, context: CallContext, key: str | None) -> str | None:
        """The caller's task opened under ``key``, if one is kept; else the token's claim
        (when the send must claim it), its grant watched and the decisions waiting, all in
        one write committed before the upstream is asked. A claim refused is refused as
        it says; when the write itself fails, both are done again alone, the claim then
        refused as the claim's (the decisions taken along are queued again by then). The
        failed write may have committed all the same (the answer to its commit lost), so
        the claim made again refuses a token it finds used as undecided (503), never as
        a replay (:meth:`~member_kit.server.jsonrpc.TaskClaim.again`)."""
        claim = context.claim_task_creation
        if claim is None:
            return self.tasks.opened_under(context.owner, key) if key is not None else None
        try:
            with heads_after_commit(), self.tasks.transaction():
                return self._opened_else_claim(context.owner, key, claim)
        except self.tasks.storage_errors:
            logger.warning("the claim's write failed; the claim alone is made", exc_info=True)
            return self._opened_else_claim(context.owner, key, claim.again)

    def _opened_else_claim(
        self, owner: str, key: str | None, claim: Callable[[], None]
    ) -> str | None:
        opened = self.tasks.opened_under(owner, key) if key is not None else None
        if opened is None:
            claim()
            if self._audit_log is not None:
                self._audit_log.append_waiting()
        return opened

    async def get_task(self, request: GetTaskRequest, context: CallContext) -> Task:
        return await self._task("GetTask", to_wire(request), context)

    async def cancel_task(self, request: CancelTaskRequest, context: CallContext) -> Task:
        return await self._task("CancelTask", to_wire(request), context)

    async def list_tasks(
        self, request: ListTasksRequest, context: CallContext
    ) -> ListTasksResponse:
        """The caller's tasks (its most recent :data:`MAX_LISTED`), each read from the
        upstream, filtered and paged here; without receipts, as the kit lists them."""
        if request.status_timestamp_after is not None:
            raise errors.InvalidParams("params.statusTimestampAfter: not supported by this agent")
        read = [
            await self._read(i, request) for i in self.tasks.owned_by(context.owner, MAX_LISTED)
        ]
        matching = [task for task in read if task is not None and _listed(task, request)]
        start, size = _offset(request.page_token), request.page_size or DEFAULT_PAGE_SIZE
        page = matching[start : start + size]
        more = start + size < len(matching)
        return ListTasksResponse(
            tasks=page,
            next_page_token=str(start + size) if more else "",
            page_size=size,
            total_size=len(matching),
        )

    async def _read(self, task_id: str, request: ListTasksRequest) -> Task | None:
        """A listed task as the upstream has it now; None if it no longer has it."""
        params: dict[str, Any] = {"id": task_id}
        if request.history_length is not None:
            params["historyLength"] = request.history_length
        metadata = self.tasks.metadata_of(task_id)
        try:
            task = await self._upstream.call("GetTask", params, Task)
        except errors.A2AError as error:
            if error.kind is a2a_errors.TASK_NOT_FOUND:
                return None
            raise
        if task.id != task_id:
            raise errors.UpstreamFailure(MALFORMED, "the upstream's GetTask names another task")
        kept = {k: v for k, v in (task.metadata or {}).items() if k not in _OURS}
        artifacts = task.artifacts if request.include_artifacts else None
        update = {"metadata": {**kept, **metadata} or None, "artifacts": artifacts}
        return task.model_copy(update=update)

    async def _task(self, method: str, params: dict[str, Any], context: CallContext) -> Task:
        """``method`` on the caller's task ``params["id"]`` (else TaskNotFound, unasked)."""
        task_id = params["id"]
        metadata = self.tasks.get(context.owner, task_id).metadata
        task = await self._upstream.call(method, params, Task)
        if task.id != task_id:
            raise errors.UpstreamFailure(MALFORMED, f"the upstream's {method} names another task")
        return self._returned(task, metadata)

    def _returned(self, task: Task, metadata: Mapping[str, Any]) -> Task:
        """``task`` with the guard's metadata in place of the upstream's, then stamped."""
        kept = {k: v for k, v in (task.metadata or {}).items() if k not in _OURS}
        merged = {**kept, **metadata}
        return self._stamp(task.model_copy(update={"metadata": merged or None}))


def _check_no_push(request: SendMessageRequest) -> None:
    """A webhook the upstream would call itself, past the guard (no receipt, any
    address): refused, as the guard's card offers no push notifications."""
    configuration = request.configuration
    if configuration is not None and configuration.task_push_notification_config is not None:
        raise errors.PushNotificationNotSupported(
            "this agent sends no push notifications; poll the task with GetTask"
        )


def _listed(task: Task, request: ListTasksRequest) -> bool:
    """``task`` matches the filters of ``request``."""
    if request.context_id is not None and task.context_id != request.context_id:
        return False
    return request.status is None or task.status.state == request.status


def _offset(page_token: str | None) -> int:
    """Where a page starts: its token is the offset of its first task."""
    if not page_token:
        return 0
    if not page_token.isdigit() or len(page_token) > 6:
        raise errors.InvalidParams("params.pageToken: not a page token of this agent")
    return int(page_token)
