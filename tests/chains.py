"""A federation for delegation chains: the coordinator's API as a real process, and
members built with the kit (the privacy team's, which sub-delegates, and the legal
team's), each a real HTTP server on loopback, registered through the API.

:class:`ChainFederation` also acts as a member holding a token (its key and its token in
hand) to ask the owner for children directly, as an adversary would.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_cards.documents import with_base_url
from agent_cards.dpop import PROOF_HEADER
from agent_cards.dpop import proof as dpop_proof
from agent_cards.keys import KeySet, SigningKey, b64url_decode
from contracts.grant import Budget, Grant
from contracts.wire import AgentCard, TaskState
from coordinator.authority.delegator import DEFAULT_ISSUER
from member_kit.server.app import create_app
from member_kit.settings import MemberSettings
from member_kit.skill import Member, Outcome
from member_kit.trust.chain import (
    ChainRefused,
    delegate,
    exchange_parameters,
    held_token,
    proof,
    relayed_receipts,
)
from member_kit.trust.issuers import load_trusted_issuers
from tests.coordinator.served import TOKEN, served
from tests.members import GUARD, example, terms_example
from tests.servers import free_port, running

CHAIN_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "chain_member.py"
EXCHANGE_PATH = "/token-exchange"
PRIVACY = "privacy-review"
TERMS = "legal-terms"
TERMS_2 = "legal-terms-2"
# A stock a2a-sdk agent behind the kit's guard (tests/interop/quickstart_agent.py).
GUARDED = "summarizer"
GUARDED_SKILL = "summarize"
GUARDED_SCOPE = "text:summarize"
REVIEW_SKILL = "review-privacy"
TERMS_SKILL = "check-terms"
TEXT_INPUT = {"text": "Refunds are handled by the support team.", "terms": ["refund", "warranty"]}
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


def chain_example() -> Any:
    return example("examples_chain_member", CHAIN_EXAMPLE)


def capture_card(base_url: str) -> AgentCard:
    """The privacy team's card, its skill also asking for the guarded agent's scope (which
    it would pass on)."""
    card = copy.deepcopy(chain_example().CARD)
    requirement = card["skills"][0]["securityRequirements"][0]["schemes"]["delegation"]
    requirement["list"] = [*requirement["list"], GUARDED_SCOPE]
    return with_base_url(AgentCard.model_validate(card), base_url)


class Capture:
    """The privacy team's skill replaced by one that keeps the token its task holds."""

    skill_id = REVIEW_SKILL
    artifact_name = "privacy-review"
    artifact_description = "captured"
    input_hint = ""
    immediate = False
    needs_budget = False

    def __init__(self) -> None:
        self.tokens: list[str] = []
        # with ``relay``, the skill also sub-delegates (to each of ``relay_to``: the
        # legal team's check-terms unless changed) with the kit's one call, and keeps the
        # task each answered with (or the refusal's reason)
        self.relay = False
        self.relay_to: list[tuple[str, str, Mapping[str, Any]]] = [(TERMS, TERMS_SKILL, TEXT_INPUT)]
        self.relayed: list[dict[str, Any] | str] = []
        # a dishonest privacy team: rewrites the hop receipts the kit carries up
        self.forge: Callable[[list[str]], list[str]] | None = None

    def input_problems(self, data: Any) -> list[str]:
        return []

    def run(self, data: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError

    async def run_later(
        self, data: Mapping[str, Any], *, lease_expires_at: int | None, budget: Budget | None
    ) -> Outcome:
        token = held_token()
        if token is not None:
            self.tokens.append(token)
        if token is not None and self.relay:
            for index, (agent, skill, data) in enumerate(self.relay_to):
                # the handoff holds one action: the first hop takes it
                actions = 1 if index == 0 else 0
                self.relayed.append(await relay(token, agent, skill, data, actions))
        if self.forge is not None:
            kept = relayed_receipts()
            kept[:] = self.forge(list(kept))
        return Outcome(TaskState.COMPLETED, {"held": token is not None})

    def failure(self, code: str, message: str) -> dict[str, Any]:
        return {"errorCode": code, "message": message}


async def relay(
    token: str,
    agent: str = TERMS,
    skill: str = TERMS_SKILL,
    data: Mapping[str, Any] = TEXT_INPUT,
    actions: int = 1,
) -> dict[str, Any] | str:
    """``agent``'s task for ``data`` through :func:`delegate` (a child holding
    ``actions`` and one context unit), or its refusal."""
    held = Grant.model_validate(claims_of(token))
    budget = half(held, context_units=1, actions=actions)
    try:
        return await delegate(agent, skill, data, budget=budget)
    except ChainRefused as refused:
        return refused.reason


def half(grant: Grant, **changes: int) -> Budget:
    """Half of what ``grant`` holds (one action), with ``changes``."""
    held = grant.handoff.budget
    values: dict[str, Any] = {
        "actions": 1,
        "context_units": held.context_units // 2,
        "effects": 0,
        "model_requests": 0 if held.model_requests is not None else None,
        "model_tokens": 0 if held.model_tokens is not None else None,
    }
    return Budget.model_validate({**values, **changes})


def claims_of(token: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(b64url_decode(token.split(".")[1]))
    return value


@dataclass
class ChainFederation:
    url: str
    keys: dict[str, KeySet]
    capture: Capture
    # the owner's own keys (its data directory), to forge what a faulty owner could sign
    data_dir: Path
    # a second coordinator process on the same data directory and database, if started
    replica_url: str | None = None
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=60))

    @property
    def exchange_url(self) -> str:
        return self.url + EXCHANGE_PATH

    def delegate(self, to: str, skill: str, data: Mapping[str, Any]) -> dict[str, Any]:
        body = {"to": to, "skill": skill, "input": dict(data), "timeout": 120}
        answer = self.client.post(f"{self.url}/v1/delegations", json=body, headers=OPERATOR)
        assert answer.status_code == 200, answer.text
        document: dict[str, Any] = answer.json()
        return document

    def parent_token(self) -> tuple[str, Grant, str]:
        """A fresh token the owner minted for the privacy team (a run of its own), its
        claims and the run's id."""
        before = len(self.capture.tokens)
        document = self.delegate(PRIVACY, REVIEW_SKILL, TEXT_INPUT)
        assert len(self.capture.tokens) == before + 1, document
        token = self.capture.tokens[-1]
        return token, Grant.model_validate(claims_of(token)), document["run_id"]

    def exchange(
        self,
        token: str,
        holder: str,
        agent: str,
        budget: Budget,
        *,
        skill: str = TERMS_SKILL,
        signer: str | None = None,
        **extra: Any,
    ) -> httpx.Response:
        """An exchange of ``token`` as ``holder`` (whose key signs the proof, unless
        ``signer`` names another member's) for ``agent``'s ``skill``."""
        parameters = exchange_parameters(token, agent, skill, budget, **extra)
        claims = claims_of(token)
        keys = self.keys[signer or holder]
        parameters["actor_token"] = proof(keys, _identity(keys), claims["iss"], parameters)
        return self.post_form(parameters)

    def post_form(self, parameters: Mapping[str, str], url: str | None = None) -> httpx.Response:
        """The form posted to the owner's exchange (at ``url``, another process of it)."""
        target = (url + EXCHANGE_PATH) if url else self.exchange_url
        with httpx.Client(timeout=60) as client:  # one per call: callable from threads
            return client.post(target, data=dict(parameters))

    def send(
        self,
        endpoint: str,
        token: str,
        handoff_id: str,
        data: Mapping[str, Any],
        skill: str = TERMS_SKILL,
        prover: str | None = PRIVACY,
    ) -> Any:
        """Send ``token`` to ``endpoint``, with a fresh holder proof (RFC 9449) by
        ``prover``'s key (None: none; the holder of a child is who exchanged for it)."""
        message = {
            "messageId": "msg-chain-test",
            "role": "ROLE_USER",
            "parts": [{"data": dict(data), "mediaType": "application/json"}],
            "metadata": {"handoffId": handoff_id, "attempt": 1, "skillId": skill},
        }
        params = {"message": message}
        request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
        if prover is not None:
            key = self.keys[prover].active
            headers[PROOF_HEADER] = dpop_proof(key, "POST", endpoint, token)
        return self.client.post(endpoint, json=request, headers=headers).json()


def _identity(keys: KeySet) -> str:
    from agent_cards.identity import identity_of

    return identity_of(keys.active.verification_key())


def register(url: str, base_url: str, name: str) -> None:
    body = {"url": base_url, "name": name, "trust_on_first_use": True}
    answer = httpx.post(f"{url}/v1/agents", json=body, headers=OPERATOR, timeout=60)
    assert answer.status_code in (200, 201), answer.text


def member_settings(coordinator: str, port: int, keys: KeySet) -> MemberSettings:
    trusted = load_trusted_issuers([f"{DEFAULT_ISSUER}={coordinator}/.well-known/jwks.json"])
    return MemberSettings(
        public_base_url=f"http://127.0.0.1:{port}",
        trusted_issuers=trusted,
        signing_keys=keys,
        exchange_url=coordinator + EXCHANGE_PATH,
    )


@contextmanager
def chain_federation(root: Path, *, replica: bool = False, **env: str) -> Iterator[ChainFederation]:
    """The coordinator's API (a process) and kit members in this process: the privacy
    team's (capturing its tokens), two legal teams' and an unmodified agent behind the
    guard, all registered; with ``replica``, a second coordinator process on the same
    data directory."""
    capture = Capture()
    names = (PRIVACY, TERMS, TERMS_2, GUARDED)
    keys = {name: KeySet(active=SigningKey.generate()) for name in names}
    with served(root, **env) as coordinator, ExitStack() as stack:
        members = {
            PRIVACY: Member("privacy_review", capture, capture_card),
            TERMS: terms_example().MEMBER,
            TERMS_2: terms_example().MEMBER,
        }
        for name, member in members.items():
            port = free_port()
            app = create_app(member_settings(coordinator.url, port, keys[name]), member)
            base = stack.enter_context(running(app, port=port))
            register(coordinator.url, base, name)
        port = free_port()
        guard = GUARD.create_app(**vars(member_settings(coordinator.url, port, keys[GUARDED])))
        register(coordinator.url, stack.enter_context(running(guard, port=port)), GUARDED)
        federation = ChainFederation(coordinator.url, keys, capture, root / "data")
        if replica:
            (root / "replica").mkdir()
            shared = {"FEDERATION_DATA_DIR": str(root / "data"), **env}
            federation.replica_url = stack.enter_context(served(root / "replica", **shared)).url
        try:
            yield federation
        finally:
            federation.client.close()
