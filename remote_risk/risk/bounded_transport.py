"""The risk service's model replies read under a byte cap: the shared transport
(:mod:`agent_cards.bounded_replies`) refusing with :class:`~member_kit.errors.ModelFailure`
(``model_reply_too_large`` or ``model_reply_malformed``).
"""

from __future__ import annotations

import httpx

from agent_cards.bounded_replies import REPLY_MALFORMED, REPLY_TOO_LARGE
from agent_cards.bounded_replies import BoundedTransport as SharedTransport
from member_kit.errors import ModelFailure

__all__ = ["REPLY_MALFORMED", "REPLY_TOO_LARGE", "capped_transport"]


def capped_transport(
    max_bytes: int, inner: httpx.AsyncBaseTransport | None = None
) -> SharedTransport:
    """A transport for the risk service's model client: replies of at most ``max_bytes``."""
    return SharedTransport(max_bytes, ModelFailure, inner)
