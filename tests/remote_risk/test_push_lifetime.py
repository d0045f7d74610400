"""Push configs live as long as their task: they go when it is evicted, and a config
registered by a send whose task was never stored (its commit failed) is not kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from contracts.wire import SendMessageRequest
from member_kit.server.agent import AgentHandler
from member_kit.server.jsonrpc import CallContext
from member_kit.server.push import PushConfigs
from member_kit.server.webhooks import Notification, PushDelivery, WebhookPolicy
from member_kit.storage.engine import open_engine
from member_kit.storage.migrations import migrate
from member_kit.tasks.memory import TaskStore
from member_kit.tasks.protocol import TaskStoreProtocol
from member_kit.tasks.sql import SQLTaskStore
from remote_risk.service import RiskSkill
from tests.remote_risk.conftest import risk_input, user_message

WEBHOOK = "http://127.0.0.1:9/hook"


class QueuedOnly:
    """A delivery that keeps what it is given instead of posting it."""

    def __init__(self) -> None:
        self.policy = WebhookPolicy.from_strings(["127.0.0.0/8"], allow_public=False)
        self.queued: list[Notification] = []

    def enqueue(self, notification: Notification) -> None:
        self.queued.append(notification)


def handler_with_push(store: TaskStoreProtocol) -> tuple[AgentHandler, PushConfigs]:
    push = PushConfigs(store.get, cast(PushDelivery, QueuedOnly()))
    return AgentHandler(store, RiskSkill(), push=push), push


def send_with_webhook(handler: AgentHandler) -> Any:
    request = SendMessageRequest.model_validate(
        {
            "message": user_message(risk_input()),
            "configuration": {"taskPushNotificationConfig": {"url": WEBHOOK}},
        }
    )
    return asyncio.run(handler.send_message(request, CallContext(owner="alice"))).task


class SQLCommitFails(SQLTaskStore):
    """A database store whose transaction fails at its end, so nothing in it is stored."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with super().transaction():
            yield
            raise OSError("the commit failed")


def sqlite_store(tmp_path: Path, capacity: int, kind: type[SQLTaskStore]) -> SQLTaskStore:
    engine = open_engine(f"sqlite+pysqlite:///{tmp_path / 'remote-risk.db'}")
    migrate(engine)
    return kind(engine, capacity)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_evicted_tasks_push_configs_are_forgotten(kind: str, tmp_path: Path) -> None:
    store = TaskStore(2) if kind == "memory" else sqlite_store(tmp_path, 2, SQLTaskStore)
    handler, push = handler_with_push(store)
    first = send_with_webhook(handler)
    second = send_with_webhook(handler)
    assert push.notifies("alice", first.id) and push.notifies("alice", second.id)
    send_with_webhook(handler)  # the store is full: the oldest finished task goes
    assert not push.notifies("alice", first.id)
    assert push.notifies("alice", second.id)


def test_a_send_whose_commit_fails_keeps_no_push_config(tmp_path: Path) -> None:
    store = sqlite_store(tmp_path, 10, SQLCommitFails)
    handler, push = handler_with_push(store)
    with pytest.raises(OSError):
        send_with_webhook(handler)
    assert len(store) == 0
    assert push._configs == {}
