"""A member agent's A2A operations: SendMessage, GetTask, ListTasks, CancelTask.

SendMessage takes exactly one data part holding the skill's input (checked by the
member's :class:`~member_kit.skill.Skill`), opens a task and runs the skill (a blocking
send of an immediate skill in the same write, else in the background). Unless
``configuration.returnImmediately`` is true it waits until the task is terminal or
interrupted. Where the skill's :class:`~member_kit.skill.Outcome` ends up:

* COMPLETED: ``task.artifacts[0]`` (named by the skill) holds one data part
  ``{"data": <the outcome's data>, "mediaType": "application/json"}``;
* INPUT_REQUIRED and FAILED: ``task.status.message`` holds that same kind of data part.

A task waiting for input takes a further message carrying its ``taskId`` and a complete
context again.

Retried sends: a message opening a task may carry ``metadata.idempotencyKey`` (the
coordinator sends ``"<run_id>:<handoff_id>"`` for every attempt of one handoff). The
owner's task for a key it has seen is answered again and nothing new is created, nor is
the delegation token's ``jti`` claimed; only a send that really opens a task claims it
(``CallContext.claim_task_creation``). The same key from another owner is unrelated.

``SendStreamingMessage`` and ``SubscribeToTask`` answer over SSE (see
:mod:`member_kit.server.streams`); push notification configs are kept by
:class:`~member_kit.server.push.PushConfigs`, and every change of a task is published to both
through :class:`~member_kit.server.streams.TaskUpdates`. The extended card (signed like
the public one) is answered to callers with a verified delegation token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from contracts.grant import Budget
from contracts.wire import (
    AgentCard,
    Artifact,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskState,
)
from member_kit import errors
from member_kit.audit.log import heads_after_commit
from member_kit.server.jsonrpc import (
    CallContext,
)
from member_kit.server.messages import (
    agent_message,
    check_configuration,
    check_same_handoff,
    idempotency_key_of,
    last_user_message,
    opened_by,
    opened_metadata,
    outcome_artifact,
    skill_input_of,
)
from member_kit.server.operations import TaskOperations
from member_kit.server.push import PushConfigs
from member_kit.server.streams import TaskEventBroker, TaskUpdates
from member_kit.skill import Outcome, Skill, internal_failure, run_now
from member_kit.storage.faults import is_storage_fault
from member_kit.tasks.protocol import TaskStoreProtocol
from member_kit.tasks.record import TaskRecord
from member_kit.telemetry.observed import Telemetry
from member_kit.trust.chain import ChainSettings, holding, relayed_metadata

logger = logging.getLogger(__name__)

RESUME_FAILURE_CODE = "resume_input_unreadable"
# The model requests and tokens behind an outcome, reported with it so the caller can
# count them in its run's budget (usage reporting is not yet part of A2A; see A2A issue 1155).
MODEL_USAGE_KEY = "modelUsage"
_UNFINISHED = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
# A send without a configuration is read as one with every member left out (the model is
# frozen, so one instance serves every such send).
_NO_CONFIGURATION = SendMessageConfiguration()


class AgentHandler(TaskOperations):
    def __init__(
        self,
        store: TaskStoreProtocol,
        skill: Skill,
        *,
        skill_delay_seconds: float = 0.0,
        updates: TaskUpdates | None = None,
        push: PushConfigs | None = None,
        extended_card: AgentCard | None = None,
        stamp: Callable[[Task], Task] | None = None,
        chain: ChainSettings | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """``skill`` does the work of each task. Without ``push`` push notification
        configs are refused (-32003). ``stamp`` gives each terminal task that leaves the
        service its receipt. The steps are observed in ``telemetry``, the app's."""
        super().__init__(
            store, updates or TaskUpdates(TaskEventBroker(), push, stamp), push, extended_card
        )
        self._skill_delay = skill_delay_seconds
        self._skill = skill
        self._chain = chain  # with it, a skill's work holds its token (trust.chain)
        self._telemetry = telemetry or Telemetry.standalone()

    # --- operations -----------------------------------------------------------------------

    async def send_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> SendMessageResponse:
        """Open (or find) the task; a blocking send of an immediate skill also does its
        work, and the task, the token's claim, the outcome and the receipt (with the
        decisions waiting for the log) are stored with one commit. Its updates are
        published only once that commit succeeded."""
        configuration = request.configuration or _NO_CONFIGURATION
        blocking = not configuration.return_immediately
        accepted: list[TaskRecord] = []

        def accept() -> tuple[TaskRecord, dict[str, Any], Task | None]:
            record, skill_input = self._accept(request, configuration, context, accepted)
            if not (blocking and self._works_now(record)):
                return record, skill_input, None
            self._work_now(record, skill_input)
            answer = self._updates.stamp(record.snapshot(configuration.history_length))
            return record, skill_input, answer

        try:
            with heads_after_commit(), self._updates.held():
                record, skill_input, answer = await self._store.run_transaction(accept)
        except BaseException:
            self._forget_push_configs_if_gone(accepted, context.owner)
            raise
        if answer is not None:
            return SendMessageResponse(task=answer)
        leased = opened_by(record, request.message)
        with holding(self._chain, context.held_token):
            self._start(record, skill_input, context.lease_expires_at, leased, context.budget)
        if blocking:
            await self._store.wait_settled(record)
        snapshot = record.snapshot(configuration.history_length)
        return SendMessageResponse(task=self._updates.stamp(snapshot))

    async def send_streaming_message(
        self, request: SendMessageRequest, context: CallContext
    ) -> AsyncIterator[StreamResponse]:
        """The task first, then its updates until it is terminal or interrupted."""
        configuration = request.configuration or _NO_CONFIGURATION
        with self._updates.held():
            record, skill_input = await self._store.run_transaction(
                lambda: self._accept(request, configuration, context)
            )
        stream = self._updates.follow(record.snapshot(configuration.history_length))
        leased = opened_by(record, request.message)
        with holding(self._chain, context.held_token):
            self._start(record, skill_input, context.lease_expires_at, leased, context.budget)
        return stream

    # --- the task's life ------------------------------------------------------------------

    def _accept(
        self,
        request: SendMessageRequest,
        configuration: SendMessageConfiguration,
        context: CallContext,
        accepted: list[TaskRecord] | None = None,
    ) -> tuple[TaskRecord, dict[str, Any]]:
        """Check a (streaming) send, open or resume its task and keep its push config;
        the task opened is also put in ``accepted`` (for undoing the config)."""
        push_config = configuration.task_push_notification_config
        if push_config is not None and self._push is None:
            raise errors.PushNotificationNotSupported(
                "push notifications are not supported by this agent; poll with GetTask instead"
            )
        check_configuration(configuration)
        if request.message.task_id is not None:  # the task before its content (docs/)
            self._store.get(context.owner, request.message.task_id)
        skill_input = self._input_of(request.message)
        if push_config is not None and self._push is not None:
            self._push.delivery.policy.check_syntax(push_config.url)
        record = self._open_task(context, request.message)
        if accepted is not None:
            accepted.append(record)
        if push_config is not None and self._push is not None:
            self._push.register(context.owner, record.id, push_config)
        return record, skill_input

    def _forget_push_configs_if_gone(self, accepted: list[TaskRecord], owner: str) -> None:
        """After a failed send: a task whose creation was rolled back keeps no configs."""
        if self._push is None or not accepted:
            return
        task_id = accepted[0].id
        try:
            self._store.get(owner, task_id)
        except errors.TaskNotFound:
            self._push.forget(owner, task_id)
        except Exception:  # the send's own error is the one to report
            logger.warning("cannot tell whether task %s was stored", task_id, exc_info=True)

    def _open_task(self, context: CallContext, message: Message) -> TaskRecord:
        if message.task_id is None:
            with self._telemetry.step_span("create_task"):
                return self._create_task(context, message)
        record = self._store.get(context.owner, message.task_id)
        if record.terminal:
            raise errors.UnsupportedOperation(
                f"task {record.id} is {record.state.value}; a finished task takes no further "
                "messages, start a new task instead",
                metadata={"taskId": record.id, "state": record.state.value},
            )
        if message.context_id is not None and message.context_id != record.context_id:
            raise errors.InvalidParams(
                f"params.message.contextId: task {record.id} belongs to another context"
            )
        self._store.resume(record, message)
        self._changed(record)
        return record

    def _create_task(self, context: CallContext, message: Message) -> TaskRecord:
        """A new task, or the owner's task for the message's idempotency key; the token's
        ``jti`` is claimed only when a task is really created, together with it."""
        record = self._store.create(
            context.owner,
            message,
            message.context_id,
            metadata=opened_metadata(message, context),
            idempotency_key=idempotency_key_of(message),
            claim=context.claim_task_creation,
        )
        check_same_handoff(record, message)  # a new task names the message's by construction
        return record

    def resume_work(self, record: TaskRecord) -> None:
        """Run the skill again on the task's stored input (it is deterministic, so the
        outcome is the one the first run would have had); a task whose input cannot be
        read again ends FAILED with ``resume_input_unreadable``."""
        try:
            skill_input = self._input_of(last_user_message(record))
        except errors.A2AError as exc:
            logger.warning("task %s cannot be resumed: %s", record.id, exc)
            message = "The task was cut off and its input cannot be read again."
            failed = Outcome(TaskState.FAILED, self._skill.failure(RESUME_FAILURE_CODE, message))
            self._report(record, failed)
            return
        # The token that opened it is not kept, so a resumed model run has no lease of its
        # own to end before: the model's own deadline applies.
        self._start(record, skill_input, None, leased=True)

    def _start(
        self,
        record: TaskRecord,
        skill_input: dict[str, Any],
        lease_expires_at: int | None,
        leased: bool,
        budget: Budget | None = None,
    ) -> None:
        """Work on a task that is submitted or working and has no worker here: a new or
        resumed task, or a retried send's task whose worker is gone (e.g. a restart).
        Unless this process already ``leased`` the task (it opened it, or took it over), it
        first takes the task's work lease, and leaves the task alone if another live
        process holds it. A model must be done before ``lease_expires_at`` (the delegation
        token's exp) and within the token's ``budget``."""
        running = self._workers.get(record.id)
        if (running is not None and not running.done()) or record.state not in _UNFINISHED:
            return
        if not leased and not self._store.claim(record.id):
            return
        worker = asyncio.create_task(self._work(record, skill_input, lease_expires_at, budget))
        self._workers[record.id] = worker
        worker.add_done_callback(lambda _: self._forget(record.id, worker))

    def _works_now(self, record: TaskRecord) -> bool:
        """Whether a blocking send can do its task's work before it answers, without a
        worker: the skill answers at once and nobody else is working on the task."""
        if self._skill_delay or not self._skill.immediate or record.state not in _UNFINISHED:
            return False
        running = self._workers.get(record.id)
        return running is None or running.done()

    def _work_now(self, record: TaskRecord, skill_input: dict[str, Any]) -> None:
        """:meth:`_work` for an immediate skill: WORKING and the outcome in one write (the
        caller is only told the outcome), each still published as its own update."""
        outcome = run_skill(self._skill, skill_input, self._telemetry)
        try:
            self._report(record, outcome, through=TaskState.WORKING)
        except Exception:
            logger.exception("reporting the outcome of task %s failed", record.id)
            self._report(record, internal_failure(self._skill), through=TaskState.WORKING)

    def _forget(self, task_id: str, worker: asyncio.Task[None]) -> None:
        if self._workers.get(task_id) is worker:
            del self._workers[task_id]
        failure = None if worker.cancelled() else worker.exception()
        if failure is not None:  # e.g. the database unavailable: the lease runs out
            logger.error("work on task %s failed; it is resumed later", task_id, exc_info=failure)

    async def _work(
        self,
        record: TaskRecord,
        skill_input: dict[str, Any],
        lease_expires_at: int | None = None,
        budget: Budget | None = None,
    ) -> None:
        await asyncio.sleep(0)  # let a returnImmediately caller see the task as submitted
        store = self._store
        if self._skill_delay == 0 and self._skill.immediate:
            # an immediate skill: WORKING and the outcome in one commit, each still its
            # own update (a stream sees WORKING, the artifact, then COMPLETED)
            with self._updates.held():
                await store.run_transaction(lambda: self._work_now(record, skill_input))
            return
        if not await store.run_transaction(lambda: store.advance(record.id, TaskState.WORKING)):
            return
        self._changed(record)
        if self._skill_delay:
            await asyncio.sleep(self._skill_delay)
        if self._skill.immediate:
            outcome = run_skill(self._skill, skill_input, self._telemetry)
        else:
            outcome = await self._telemetry.skill_later(
                self._skill, skill_input, lease_expires_at=lease_expires_at, budget=budget
            )
        relayed = relayed_metadata()  # the receipts of the hops the work delegated to
        try:
            with self._updates.held():
                await store.run_transaction(lambda: self._report(record, outcome, relayed))
        except Exception as exc:
            if is_storage_fault(exc):
                raise  # not the task's failure: its lease runs out and it is resumed
            # Never leave a task WORKING with callers blocked on it.
            logger.exception("reporting the outcome of task %s failed", record.id)
            self._report(record, internal_failure(self._skill))

    def _input_of(self, message: Message) -> dict[str, Any]:
        return skill_input_of(message, self._skill)

    def _report(
        self,
        record: TaskRecord,
        outcome: Outcome,
        relayed: dict[str, Any] | None = None,
        *,
        through: TaskState | None = None,
    ) -> None:
        """Put the task into the outcome's state with its data (passing ``through`` on the
        way, in the same write) and publish each change; the model ``usage`` behind it, if
        any, goes into the artifact's or the message's metadata (``modelUsage``), and the
        ``relayed`` hop receipts (:func:`~member_kit.trust.chain.relayed_metadata`) into
        the artifact's."""
        state, data, usage = outcome
        metadata = {MODEL_USAGE_KEY: usage} if usage is not None else None
        if state is TaskState.COMPLETED:
            if relayed:
                metadata = {**(metadata or {}), **relayed}
            artifact = outcome_artifact(self._skill, data, metadata)
            moved = self._advance(record, through, state, artifacts=[artifact])
            if moved and self._updates.heard(record.owner, record.id):
                snapshot = record.snapshot()
                self._updates.artifact(record.owner, snapshot, artifact, last_chunk=True)
                self._updates.status(record.owner, snapshot)
        elif self._advance(record, through, state, message=agent_message(record, data, metadata)):
            self._changed(record)

    def _advance(
        self,
        record: TaskRecord,
        through: TaskState | None,
        state: TaskState,
        *,
        message: Message | None = None,
        artifacts: list[Artifact] | None = None,
    ) -> bool:
        """Move the task on; False if it is gone or already terminal."""
        if through is None:
            return self._store.advance(record.id, state, message, artifacts)
        passed = self._store.advance_through(record.id, through, state, message, artifacts)
        if passed is None:
            return False
        if self._updates.heard(record.owner, record.id):
            self._updates.status(record.owner, passed.snapshot())
        return True


def run_skill(
    skill: Skill, skill_input: Mapping[str, Any], telemetry: Telemetry | None = None
) -> Outcome:
    """An immediate run of ``skill``, a failure as a FAILED outcome; in its span and timed
    in ``telemetry`` when given."""
    if telemetry is None:
        return run_now(skill, skill_input)
    return telemetry.skill_now(skill, skill_input)
