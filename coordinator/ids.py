"""The names this coordinator gives what it makes: runs, handoffs, tokens, messages.

Each starts with the time it was made (:func:`agent_cards.storage.ids.ordered_hex`), so
the rows keyed by them (a run's, a handoff's, a grant's, each ledger event's index entry
by run) go where the last ones went: a group commit of many handoffs writes one page a
B-tree, not one page a handoff. The random bytes after the time keep them unguessable:
48 bits for a run or a handoff (as many as before), 80 for a token or a message.
"""

from __future__ import annotations

from agent_cards.storage.ids import ordered_hex

__all__ = ["new_handoff_id", "new_jti", "new_message_id", "new_run_id"]


def new_run_id() -> str:
    return f"run-{ordered_hex(6)}"


def new_handoff_id() -> str:
    return f"ho-{ordered_hex(6)}"


def new_jti() -> str:
    return f"jti-{ordered_hex(10)}"


def new_message_id() -> str:
    return f"msg-{ordered_hex(10)}"
