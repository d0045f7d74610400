"""Sub-delegation from inside a skill: one call exchanges the task's token and sends.

While the kit runs a skill in the background it holds the delegation token the task was
opened with (:func:`holding`, a context variable, never stored or logged). A skill asks
a third registered agent for help with::

    from member_kit.trust.chain import delegate

    task = await delegate("legal-terms", "check-terms", {"text": ..., "terms": [...]},
                          budget=Budget(actions=1, context_units=1000, effects=0))

which (1) asks the run's owner for a child token by RFC 8693 token exchange, proving
with this member's card-signing key that it holds the token (a ``chain-proof+jwt`` bound
to the exact request, see docs/delegation-token.md), then (2) sends the A2A message
(JSON-RPC ``SendMessage``, A2A v1.0) to the agent with the child token, naming the
handoff the owner chose, and returns the task the agent answered with (wire JSON).
The child names this member's key (``cnf.jkt``, RFC 9449): the send carries a fresh
``DPoP`` proof by that key (:func:`agent_cards.dpop.proof`), so the child is useless to
anyone who sees it on the wire.

The message is sent over JSON-RPC, the binding the target must be registered with
(another is ``binding_unsupported``). A refusal by the owner is :class:`ChainRefused`
with the owner's stable reason; an agent
that cannot be reached or answers with an error is :class:`ChainRefused` too
(``agent_unreachable``, ``agent_error``), naming the cause. Both requests carry
``traceparent`` for the skill's span, so the hop is one trace with the run that asked.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_cards import dpop, tls
from agent_cards.identity import signing_key_named
from agent_cards.keys import KeySet, b64url_decode, b64url_encode
from agent_cards.signatures.primitive import signed_compact
from agent_cards.transparency.receipts import HOPS_KEY, RECEIPTS_EXTENSION_URI, receipt_of
from contracts import strict_json
from contracts.chain import (
    GRANT_TYPE,
    JWT_TOKEN_TYPE,
    PROOF_LIFETIME,
    PROOF_TYP,
    request_binding,
)
from contracts.grant import Budget
from contracts.wire import Message, Part, Role, SendMessageRequest, to_wire
from member_kit.telemetry import tracing

DEFAULT_TIMEOUT = 30.0


class ChainRefused(Exception):
    """The exchange or the send was refused: ``reason`` stable, ``status`` the HTTP one."""

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class ChainSettings:
    """Where this member asks for child tokens (``exchange_url``: the owner's
    ``/token-exchange``) and the keys it proves possession with."""

    exchange_url: str
    keys: KeySet = field(repr=False)


@dataclass(frozen=True)
class Holding:
    token: str = field(repr=False)
    settings: ChainSettings
    # the receipts of the tasks :func:`delegate` got back (compact JWS), in order: the
    # kit carries them up in this task's artifact (:func:`relayed_metadata`)
    relayed: list[str] = field(default_factory=list)


_HOLDING: ContextVar[Holding | None] = ContextVar("member_kit_chain_holding", default=None)


@contextmanager
def holding(settings: ChainSettings | None, token: str | None) -> Iterator[None]:
    """Within this block (and the tasks created in it) the skill holds ``token``, the
    verified delegation token of its request; nothing without chains or a token."""
    if settings is None or not token:
        yield
        return
    reset = _HOLDING.set(Holding(token, settings))
    try:
        yield
    finally:
        _HOLDING.reset(reset)


@dataclass(frozen=True)
class ChildToken:
    """What the owner answered: the child token and where and how to use it."""

    token: str = field(repr=False)
    endpoint: str
    handoff_id: str
    attempt: int
    expires_in: int


def proof(keys: KeySet, holder: str, owner: str, parameters: Mapping[str, str]) -> str:
    """The ``chain-proof+jwt`` for ``parameters``, signed by the key whose identity is
    ``holder`` (the parent token's ``aud``)."""
    key = signing_key_named(keys, holder)
    now = int(time.time())
    header = {"alg": key.alg, "kid": key.kid, "typ": PROOF_TYP}
    claims = {
        "iss": holder,
        "aud": owner,
        "iat": now,
        "exp": now + PROOF_LIFETIME,
        "jti": f"proof-{uuid.uuid4().hex}",
        "req": request_binding(parameters),
    }
    return signed_compact(f"{_segment(header)}.{_segment(claims)}", key)


def half_budget(held: Budget | None) -> Budget:
    """A child's share of ``held``: one action and half the context units, no effects,
    and no model requests where the held budget names a model limit (a child can never
    have more than its holder; the exchange refuses a wider one)."""
    if held is None:
        return Budget(actions=1, context_units=0, effects=0)
    return Budget(
        actions=min(1, held.actions),
        context_units=held.context_units // 2,
        effects=0,
        model_requests=0 if held.model_requests is not None else None,
        model_tokens=0 if held.model_tokens is not None else None,
    )


def _segment(value: Mapping[str, Any]) -> str:
    return b64url_encode(strict_json.dumps(dict(value)))


def unverified_claims(token: str) -> dict[str, Any]:
    """The claims of a token this member already verified (its own task's)."""
    value = strict_json.loads(b64url_decode(token.split(".")[1]).decode("utf-8"))
    if not isinstance(value, dict):
        raise ChainRefused("token_malformed", "the held token's claims are not an object")
    return value


def exchange_parameters(
    token: str,
    agent: str,
    skill: str,
    budget: Budget,
    scope: str | None = None,
    expires_in: int | None = None,
) -> dict[str, str]:
    """The RFC 8693 form, without the proof."""
    parameters = {
        "grant_type": GRANT_TYPE,
        "subject_token": token,
        "subject_token_type": JWT_TOKEN_TYPE,
        "actor_token_type": JWT_TOKEN_TYPE,
        "audience": agent,
        "skill": skill,
        "budget": strict_json.dumps(budget.model_dump(exclude_none=True)).decode("ascii"),
    }
    if scope is not None:
        parameters["scope"] = scope
    if expires_in is not None:
        parameters["expires_in"] = str(expires_in)
    return parameters


async def exchange(
    agent: str,
    skill: str,
    *,
    budget: Budget,
    scope: str | None = None,
    expires_in: int | None = None,
    client: httpx.AsyncClient | None = None,
) -> ChildToken:
    """A child token for ``agent``'s ``skill`` from the token this task holds."""
    held = _held()
    claims = unverified_claims(held.token)
    parameters = exchange_parameters(held.token, agent, skill, budget, scope, expires_in)
    keys = held.settings.keys
    parameters["actor_token"] = proof(keys, claims["aud"], claims["iss"], parameters)
    async with _client(client) as http:
        try:
            headers = tracing.inject({})  # the hop joins the run's trace
            answer = await http.post(held.settings.exchange_url, data=parameters, headers=headers)
        except httpx.HTTPError as exc:
            raise ChainRefused("owner_unreachable", type(exc).__name__) from None
    document = _json(answer)
    if answer.status_code != 200:
        error = _error_of(document)
        reason = str(error.get("reason") or "exchange_refused")
        raise ChainRefused(reason, str(error.get("message") or ""), answer.status_code)
    if document.get("binding") != "JSONRPC":
        raise ChainRefused(
            "binding_unsupported", f"{agent} is registered over {document.get('binding')}"
        )
    return ChildToken(
        token=document["access_token"],
        endpoint=document["endpoint"],
        handoff_id=document["handoff_id"],
        attempt=int(document["attempt"]),
        expires_in=int(document["expires_in"]),
    )


async def delegate(
    agent: str,
    skill: str,
    data: Mapping[str, Any],
    *,
    budget: Budget,
    scope: str | None = None,
    expires_in: int | None = None,
    client: httpx.AsyncClient | None = None,
) -> dict[str, Any]:
    """Exchange this task's token for one for ``agent`` and send it ``data`` for
    ``skill``; the task it answers with (A2A v1.0 wire JSON)."""
    child = await exchange(
        agent, skill, budget=budget, scope=scope, expires_in=expires_in, client=client
    )
    message = Message(
        message_id=f"msg-{uuid.uuid4().hex}",
        role=Role.USER,
        parts=[Part(data=dict(data), media_type="application/json")],
        metadata={"handoffId": child.handoff_id, "attempt": child.attempt, "skillId": skill},
    )
    params = to_wire(SendMessageRequest(message=message))
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    headers = tracing.inject({"Authorization": f"Bearer {child.token}", "A2A-Version": "1.0"})
    headers.update(holder_proof(child, "POST"))
    async with _client(client) as http:
        try:
            answer = await http.post(child.endpoint, json=request, headers=headers)
        except httpx.HTTPError as exc:
            raise ChainRefused("agent_unreachable", f"{agent}: {type(exc).__name__}") from None
    document = _json(answer)
    result = document.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("task"), dict):
        error = _error_of(document)
        message_text = str(error.get("message") or f"HTTP {answer.status_code}")
        raise ChainRefused("agent_error", f"{agent}: {message_text}", answer.status_code)
    task: dict[str, Any] = result["task"]
    _keep_receipt(task)
    return task


def _keep_receipt(task: Mapping[str, Any]) -> None:
    """Keep the receipt the agent signed for ``task`` (receipts extension), if any, for
    this task's own answer to carry up to the owner."""
    metadata = task.get("metadata")
    receipt = receipt_of(metadata if isinstance(metadata, Mapping) else None)
    held = _HOLDING.get()
    if held is not None and isinstance(receipt, str) and receipt not in held.relayed:
        held.relayed.append(receipt)


def relayed_receipts() -> list[str]:
    """The receipts kept so far by this task's work (the live list; empty outside it)."""
    held = _HOLDING.get()
    return held.relayed if held is not None else []


def relayed_metadata() -> dict[str, Any] | None:
    """What the artifact of this task's answer carries of the hops it delegated: the
    receipts of every task :func:`delegate` got back, under the receipts extension's
    key (``{URI: {"hops": [JWS, ...]}}``, docs/receipts-extension.md); None without any."""
    kept = relayed_receipts()
    return {RECEIPTS_EXTENSION_URI: {HOPS_KEY: list(kept)}} if kept else None


def holder_proof(child: ChildToken, method: str) -> dict[str, str]:
    """``{"DPoP": proof}`` by this member's key for a request to ``child.endpoint`` when
    the child names a holder key (``cnf``), else {}: the key whose identity is the held
    token's ``aud``, the one that proved the exchange and that the child names."""
    if "cnf" not in unverified_claims(child.token):
        return {}
    held = _held()
    key = signing_key_named(held.settings.keys, unverified_claims(held.token)["aud"])
    return {dpop.PROOF_HEADER: dpop.proof(key, method, child.endpoint, child.token)}


def held_token() -> str | None:
    """The token the running task holds (None outside a task's work, or without chains)."""
    held = _HOLDING.get()
    return held.token if held is not None else None


def _held() -> Holding:
    held = _HOLDING.get()
    if held is None:
        raise ChainRefused("no_delegation", "this task holds no delegation token to delegate from")
    return held


class _client:
    """The given client, or one for this call only."""

    def __init__(self, client: httpx.AsyncClient | None) -> None:
        self._given = client
        self._own: httpx.AsyncClient | None = None

    async def __aenter__(self) -> httpx.AsyncClient:
        if self._given is not None:
            return self._given
        self._own = httpx.AsyncClient(
            timeout=DEFAULT_TIMEOUT, trust_env=False, verify=tls.verified()
        )
        return self._own

    async def __aexit__(self, *exc: object) -> None:
        if self._own is not None:
            await self._own.aclose()


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        value = strict_json.loads(answer.content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error_of(document: Mapping[str, Any]) -> Mapping[str, Any]:
    error = document.get("error")
    return error if isinstance(error, dict) else {}
