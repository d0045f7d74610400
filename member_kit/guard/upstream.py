"""The guard's one way to the agent it guards: its card at start, JSON-RPC calls after.

Every reply is read under a byte cap (:class:`~agent_cards.bounded_replies.BoundedTransport`)
and parsed as strict JSON; members our wire models do not know are set aside
(:func:`~agent_cards.bindings.lenient.known_part`). The card is fetched once, at start,
from the upstream's well-known path; calls go to the JSON-RPC interface the card names,
which must be on the upstream's own origin. No credential of the caller is forwarded.

Failures: a card that cannot be fetched or served is
:class:`~member_kit.errors.UpstreamCardInvalid`; a call that fails is
:class:`~member_kit.errors.UpstreamFailure` with a stable reason, except an A2A error the
upstream answered (TaskNotFound, TaskNotCancelable, ...), which passes on as that error.
"""

from __future__ import annotations

import itertools
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from agent_cards import tls
from agent_cards.bindings.lenient import known_part
from agent_cards.bounded_replies import REPLY_TOO_LARGE, BoundedTransport
from contracts import a2a_errors, strict_json
from contracts.strict_json import StrictJSONError
from contracts.wire import AGENT_CARD_PATH, PROTOCOL_VERSION, VERSION_HEADER, AgentCard, JSONObject
from member_kit import errors

Model = TypeVar("Model", bound=BaseModel)
UNREACHABLE = "upstream_unreachable"
TIMEOUT = "upstream_timeout"
TOO_LARGE = "upstream_reply_too_large"
MALFORMED = "upstream_reply_malformed"
# The upstream's A2A errors that pass on to the caller as they are.
_PASSED_ON = frozenset(kind.code for kind in a2a_errors.ALL_KINDS) - {
    a2a_errors.INTERNAL_ERROR.code
}
_MAX_MESSAGE = 200


def card_url(upstream_url: str) -> str:
    """Where the upstream's card is: the URL itself if it names the card, else its
    well-known path under it."""
    if urlsplit(upstream_url).path.endswith(AGENT_CARD_PATH):
        return upstream_url
    return upstream_url.rstrip("/") + AGENT_CARD_PATH


def _refusal(reason: str, message: str) -> Exception:
    mapped = TOO_LARGE if reason == REPLY_TOO_LARGE else MALFORMED
    return errors.UpstreamFailure(mapped, message.replace("model reply", "upstream reply"))


def fetch_card(upstream_url: str, *, max_bytes: int, timeout: float) -> AgentCard:
    """The upstream's card (its unknown members set aside), or ``UpstreamCardInvalid``."""
    url = card_url(upstream_url)
    try:
        with (
            httpx.Client(
                timeout=timeout, follow_redirects=False, verify=tls.verified(True)
            ) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            body = _capped(response, max_bytes)
    except httpx.HTTPError as exc:
        raise errors.UpstreamCardInvalid(f"cannot fetch {url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise errors.UpstreamCardInvalid(f"{url} answered HTTP {response.status_code}")
    try:
        document = strict_json.loads(body)
    except StrictJSONError as exc:
        message = f"{url} is no A2A v1.0 Agent Card: {type(exc).__name__}"
        raise errors.UpstreamCardInvalid(message) from None
    return card_of(document, url)


def card_of(document: Any, source: str) -> AgentCard:
    """``document`` as an Agent Card (its unknown members set aside), or
    ``UpstreamCardInvalid`` naming ``source``."""
    try:
        known, _ = known_part(AgentCard, document)
        return AgentCard.model_validate(known)
    except ValidationError as exc:
        message = f"{source} is no A2A v1.0 Agent Card: {type(exc).__name__}"
        raise errors.UpstreamCardInvalid(message) from None


def _capped(response: httpx.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise errors.UpstreamCardInvalid(f"the upstream card exceeds {max_bytes} bytes")
    chunks: list[bytes] = []
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        if sum(map(len, chunks)) > max_bytes:
            raise errors.UpstreamCardInvalid(f"the upstream card exceeds {max_bytes} bytes")
    return b"".join(chunks)


def jsonrpc_url(card: AgentCard, upstream_url: str) -> str:
    """The upstream card's JSON-RPC interface, which must be on the upstream's origin."""
    interface = card.jsonrpc_interface()
    if interface is None:
        raise errors.UpstreamCardInvalid("the upstream card offers no JSON-RPC 1.x interface")
    given, named = urlsplit(upstream_url), urlsplit(interface.url)
    if (named.scheme, named.netloc) != (given.scheme, given.netloc):
        raise errors.UpstreamCardInvalid(
            "the upstream card's JSON-RPC interface is not on the upstream's origin"
        )
    return interface.url


class Upstream:
    """JSON-RPC calls to the guarded agent, each reply bounded and parsed strictly."""

    def __init__(self, url: str, *, max_bytes: int, timeout: float, connections: int) -> None:
        self.url = url
        self._ids = itertools.count(1)
        self._client = httpx.AsyncClient(
            transport=BoundedTransport(
                max_bytes,
                _refusal,
                httpx.AsyncHTTPTransport(
                    verify=tls.verified(True), limits=httpx.Limits(max_connections=connections)
                ),
            ),
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
        )

    async def call(self, method: str, params: JSONObject, result_type: type[Model]) -> Model:
        """The result of ``method`` as ``result_type``; an error as described above."""
        return result_of(method, await self._result(method, params), result_type)

    async def _result(self, method: str, params: JSONObject) -> Any:
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        headers = {VERSION_HEADER: PROTOCOL_VERSION, "Content-Type": "application/json"}
        try:
            response = await self._client.post(
                self.url, content=strict_json.dumps(body), headers=headers
            )
        except httpx.TimeoutException:
            raise errors.UpstreamFailure(TIMEOUT, "the upstream did not answer in time") from None
        except httpx.HTTPError as exc:
            message = f"the upstream cannot be reached: {type(exc).__name__}"
            raise errors.UpstreamFailure(UNREACHABLE, message) from None
        return _reply_result(response, request_id)

    async def aclose(self) -> None:
        await self._client.aclose()


def result_of(method: str, result: Any, result_type: type[Model]) -> Model:
    """The ``result`` of ``method`` as ``result_type`` (its unknown members set aside), or
    an ``UpstreamFailure``."""
    known, _ = known_part(result_type, result)
    try:
        return result_type.model_validate(known)
    except ValidationError:
        message = f"the upstream's {method} result is no {result_type.__name__}"
        raise errors.UpstreamFailure(MALFORMED, message) from None


def _reply_result(response: httpx.Response, request_id: int) -> Any:
    try:
        document = strict_json.loads(response.content)
    except StrictJSONError:
        raise errors.UpstreamFailure(MALFORMED, "the upstream's reply is not strict JSON") from None
    if not isinstance(document, dict) or document.get("id") != request_id:
        raise errors.UpstreamFailure(MALFORMED, "the upstream's reply is no answer to the call")
    if "error" in document:
        raise passed_on(document["error"])
    if "result" not in document:
        raise errors.UpstreamFailure(MALFORMED, "the upstream's reply holds no result")
    return document["result"]


def passed_on(error: Any) -> errors.A2AError:
    """The upstream's A2A error as ours, or an ``UpstreamFailure`` for anything else."""
    code = error.get("code") if isinstance(error, dict) else None
    kind = a2a_errors.BY_CODE.get(code) if code in _PASSED_ON else None
    if kind is None:
        return errors.UpstreamFailure(MALFORMED, f"the upstream answered error {code!r}")
    message = error.get("message")
    text = message[:_MAX_MESSAGE] if isinstance(message, str) else kind.reason
    return errors.A2AError(f"upstream: {text}", kind=kind)
