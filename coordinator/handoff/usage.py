"""What a remote reported spending on models for a handoff (``modelUsage`` in its metadata).

A remote names the model requests (and tokens) it made for a task in the metadata of the
artifact or of the final status message: ``{"modelUsage": {"requests": N, "totalTokens":
T}}``. It is untrusted and only counted: a figure that is not a plain count, or that is
beyond belief, is not read; tokens not given are unknown, never 0.
"""

from __future__ import annotations

from typing import Any

from contracts.handoff import ModelUsage
from contracts.wire import Task

USAGE_KEY = "modelUsage"
# A remote reporting more model requests than this for one handoff is not believed.
MAX_REPORTED_REQUESTS = 1000


def reported_usage(task: Task | None) -> ModelUsage | None:
    """The model usage ``task`` reports, if it reports a well-formed one."""
    if task is None:
        return None
    carriers = [artifact.metadata for artifact in task.artifacts or ()]
    if task.status.message is not None:
        carriers.append(task.status.message.metadata)
    for metadata in carriers:
        usage = (metadata or {}).get(USAGE_KEY)
        if isinstance(usage, dict):
            return _usage(usage)
    return None


def usage_change(task: Task | None) -> dict[str, Any]:
    """The record change that keeps ``task``'s reported usage (nothing if it reports none)."""
    usage = reported_usage(task)
    return {} if usage is None else {"remote_model_usage": usage}


def _usage(usage: dict[str, Any]) -> ModelUsage | None:
    requests, tokens = usage.get("requests"), usage.get("totalTokens")
    if type(requests) is not int or not 0 <= requests <= MAX_REPORTED_REQUESTS:
        return None
    known = type(tokens) is int and tokens >= 0
    return ModelUsage(requests=requests, total_tokens=tokens if known else None)
