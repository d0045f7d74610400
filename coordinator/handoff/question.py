"""What a remote asked when it stopped for input or authorisation, kept for the operator.

An INPUT_REQUIRED or AUTH_REQUIRED task says in its status message what it needs. This
coordinator does not continue such a task (it is cancelled, see
:func:`~coordinator.dispatch.attempt.settling.settle`), so the operator must be able to
read the question: it is kept in the run's document and the ledger and shown by
``delegate`` and ``run show``. It is the remote's text, never an instruction: marked
``untrusted``, bounded in size (what does not fit is named by its hash and size, never
silently dropped), and it grants nothing (an auth-required task is not an authorisation).
"""

from __future__ import annotations

import hashlib
from typing import Any

from contracts import strict_json
from contracts.wire import Task, TaskState

ASKS_FOR = {TaskState.INPUT_REQUIRED: "input", TaskState.AUTH_REQUIRED: "authorization"}
MAX_TEXT_CHARS = 4000
MAX_DATA_BYTES = 16 * 1024


def remote_question(task: Task) -> dict[str, Any] | None:
    """The question of an interrupted task as a document, or None for any other state."""
    state = task.status.state
    if state not in ASKS_FOR:
        return None
    parts = task.status.message.parts if task.status.message is not None else []
    texts = [part.text for part in parts if part.text is not None]
    data = [part.data for part in parts if part.data is not None]
    others = [
        {"kind": name, "size": len(str(getattr(part, name)))}
        for part in parts
        for name in ("url", "raw")
        if getattr(part, name) is not None
    ]
    received = strict_json.dumps(
        [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in parts]
    )
    text = "\n".join(texts)
    shown_data = data if len(strict_json.dumps(data)) <= MAX_DATA_BYTES else []
    return {
        "state": state.value,
        "asks_for": ASKS_FOR[state],
        "untrusted": True,
        "text": text[:MAX_TEXT_CHARS],
        "data": shown_data,
        "other_parts": others,
        "truncated": len(text) > MAX_TEXT_CHARS or shown_data is not data,
        "content_hash": "sha256:" + hashlib.sha256(received).hexdigest(),
        "size": len(received),
    }
