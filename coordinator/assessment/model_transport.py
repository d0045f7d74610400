"""The coordinator's model replies read under a byte cap: the shared transport
(:mod:`agent_cards.bounded_replies`) refusing with
:class:`~coordinator.errors.ModelReplyTooLarge` or :class:`~coordinator.errors.ModelReplyMalformed`.
"""

from __future__ import annotations

import httpx

from agent_cards.bounded_replies import REPLY_TOO_LARGE
from agent_cards.bounded_replies import BoundedTransport as SharedTransport
from coordinator.errors import ModelReplyMalformed, ModelReplyTooLarge

__all__ = ["capped_transport"]


def _refusal(reason: str, message: str) -> Exception:
    if reason == REPLY_TOO_LARGE:
        return ModelReplyTooLarge(message)
    return ModelReplyMalformed(message)


def capped_transport(
    max_bytes: int, inner: httpx.AsyncBaseTransport | None = None
) -> SharedTransport:
    """A transport for the model gateway's client: replies of at most ``max_bytes``."""
    return SharedTransport(max_bytes, _refusal, inner)
