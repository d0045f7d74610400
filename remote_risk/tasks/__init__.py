"""remote_risk's tasks: the record, the store protocol, in-memory and SQL stores."""

from remote_risk.tasks.memory import TaskStore, TaskStoreProtocol
from remote_risk.tasks.sql import SQLTaskStore

__all__ = ["SQLTaskStore", "TaskStore", "TaskStoreProtocol"]
