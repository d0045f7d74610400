"""Load a shipped Agent Card document and make it a card for one deployment.

A document in ``agent_cards/documents/<name>.json`` is a complete A2A v1.0 ``AgentCard``
except that its interface URLs may be paths (``/a2a/jsonrpc``): where a service is reached
is only known when it is deployed, so :func:`card_for` resolves them against the public
base URL at serve time.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any
from urllib.parse import urljoin, urlsplit

from pydantic import ValidationError

from contracts import strict_json
from contracts.strict_json import StrictJSONError
from contracts.wire import AgentCard

_DOCUMENT_NAME = re.compile(r"[a-z][a-z0-9-]*")


class CardDocumentError(ValueError):
    """A shipped card document is missing, not strict JSON, or not a v1.0 AgentCard."""


def load_document(name: str) -> AgentCard:
    """The shipped document ``name`` (e.g. ``"risk"``), validated as an AgentCard."""
    if not _DOCUMENT_NAME.fullmatch(name):
        raise CardDocumentError(f"{name!r} is not a card document name")
    resource = resources.files("agent_cards") / "documents" / f"{name}.json"
    try:
        document = strict_json.loads(resource.read_bytes())
    except FileNotFoundError:
        raise CardDocumentError(f"no card document named {name!r}") from None
    except StrictJSONError as exc:
        raise CardDocumentError(f"card document {name!r}: {exc}") from None
    return parse_card(name, document)


def parse_card(name: str, document: Any) -> AgentCard:
    try:
        return AgentCard.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(step) for step in error['loc']) or '(card)'}: {error['msg']}"
            for error in exc.errors()
        )
        raise CardDocumentError(f"card document {name!r} is not an AgentCard: {problems}") from None


def with_base_url(card: AgentCard, base_url: str) -> AgentCard:
    """``card`` with every interface URL given as a path resolved against ``base_url``."""
    if not urlsplit(base_url).netloc:
        raise ValueError(f"base URL {base_url!r} is not absolute")
    root = base_url.rstrip("/") + "/"
    interfaces = [
        interface.model_copy(update={"url": urljoin(root, interface.url.lstrip("/"))})
        for interface in card.supported_interfaces
    ]
    return card.model_copy(update={"supported_interfaces": interfaces})


def card_for(name: str, base_url: str) -> AgentCard:
    """The shipped card ``name`` as served from ``base_url``."""
    return with_base_url(load_document(name), base_url)
