"""What a coordinator can be asked to do: the one service every entry point goes through.

The command line (on a data directory, or through ``--server``), the HTTP API of
``federation serve coordinator``, the demo, the evaluation, the workers and recovery all
call :class:`CoordinatorService`. It takes the API's request documents and answers with
documents (:mod:`coordinator.service.api_models`), so the CLI prints the same thing
whether it ran locally or asked a server, and no entry point can assemble a run its own
way: every run starts through :func:`~coordinator.handoff.run.start_run` with the
workspace's ledger and store.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.keys import KeyMaterialError, TrustedKeys
from coordinator.audit import ledger, proofs
from coordinator.audit.anchors import Anchors
from coordinator.audit.log import tree_heads
from coordinator.audit.log.events import AuditEvent
from coordinator.audit.proof_check import verify_document
from coordinator.audit.reconstruction import reconstruct
from coordinator.authority import identity
from coordinator.authority.hops import is_exchanged
from coordinator.dispatch.attempt.card_caller import card_caller
from coordinator.dispatch.attempt.driver import (
    RemoteOutcome,
)
from coordinator.dispatch.attempt.receipts import declares_receipts
from coordinator.dispatch.delegate import DelegationOrder, Interruption, delegate_once
from coordinator.dispatch.submit import submit_for_workers
from coordinator.errors import UsageError
from coordinator.handoff import run_state
from coordinator.handoff.declared import declared_contracts, delegation_contract
from coordinator.handoff.run import Run
from coordinator.remote.cards.audit_credentials import AuditCredentials
from coordinator.remote.cards.card_verification import key_reason
from coordinator.remote.cards.registered_agent import RegisteredAgent
from coordinator.remote.cards.registry import Registry
from coordinator.remote.cards.trust_anchor import TrustAnchor
from coordinator.remote.wire.client import A2AClient
from coordinator.service import artifact_content, reconcile, reconcile_verdict, run_list
from coordinator.service.agent_views import agent_detail, agent_view, pending_card
from coordinator.service.api_models import (
    AgentDetail,
    AgentView,
    PendingCard,
    RegistrationView,
    RunList,
    Submitted,
    VerifyView,
    verify_view,
)
from coordinator.service.api_requests import DelegationRequest, RegisterRequest
from coordinator.service.run_list import RunQuery
from coordinator.storage.delegation_keys import SubmissionKey
from coordinator.storage.runs import RunStore
from coordinator.workspace import DATABASE_ENV, Workspace

if TYPE_CHECKING:  # each entry point imports what it runs: a `runs` listing no assessment
    from coordinator.assessment.chain_case import ChainResult
    from coordinator.assessment.evaluate import Row
    from coordinator.assessment.model_gateway import ModelConfig
    from coordinator.assessment.pilot import PilotResult
    from coordinator.assessment.supervisor import SupervisedResult
    from coordinator.recovery.worker import Worker


def trust_anchor(request: RegisterRequest) -> TrustAnchor:
    keys = None
    if request.trust_key is not None:
        try:
            keys = TrustedKeys.from_json(request.trust_key)
        except KeyMaterialError as exc:
            raise UsageError(
                f"trust_key is not a usable JWK or JWK Set: {exc}",
                key_reason(exc, "trust_key_unusable"),
            ) from None
    return TrustAnchor(keys, request.expect_kid, request.trust_on_first_use)


def _stored_document(store: RunStore, run_id: str) -> dict[str, Any]:
    row = store.run(run_id)
    if row is None:
        raise UsageError(f"no run {run_id!r} in the database", "unknown_run")
    document: dict[str, Any] = row["document"]
    return document


@dataclass
class CoordinatorService:
    ws: Workspace
    # A long-lived process sets one pooled client for all its delegations (see api.py).
    client: A2AClient | None = None

    # --- specialists ----------------------------------------------------------------------

    async def register(self, request: RegisterRequest) -> RegistrationView:
        anchor = trust_anchor(request)
        contracts = declared_contracts(request.return_schemas, request.return_finding)
        async with A2AClient() as client:
            registry = Registry(self.ws.data, self.ws.trail("operator"), self.ws.run_store())
            caller = card_caller(identity.coordinator_keys(self.ws.data), identity.issuer_id())
            registration = await registry.register(
                client, request.url, request.name, request.skill, anchor, request.approve,
                contracts, caller, request.allow_origins, request.take_address_from,
            )  # fmt: skip
        return RegistrationView(status=registration.status, agent=agent_view(registration.agent))

    def agents(self) -> list[AgentView]:
        return [agent_view(agent) for agent in Registry(self.ws.data).agents()]

    def agent_detail(self, name: str) -> AgentDetail:
        return agent_detail(self.agent(name))

    def pending(self) -> list[PendingCard]:
        """Every held card, with what it asks for beyond the registered one."""
        agents = Registry(self.ws.data).agents()
        return [held for agent in agents if (held := pending_card(agent)) is not None]

    def remove_agent(self, name: str) -> AgentView:
        """Forget the agent, and the audit credential registered for it."""
        registry = Registry(self.ws.data, self.ws.trail("operator"))
        removed = agent_view(registry.remove(name))
        self.remove_audit_credential(name)
        return removed

    def agent(self, name: str) -> RegisteredAgent:
        return Registry(self.ws.data).get(name)

    # --- delegation -----------------------------------------------------------------------

    def order(self, request: DelegationRequest) -> DelegationOrder:
        """The delegation to drive or submit; an unknown agent or skill is refused here,
        before any run exists (admission still checks the skill for every other path)."""
        agent = self.agent(request.to)
        if request.skill not in agent.skill_ids():
            known = ", ".join(agent.skill_ids()) or "none"
            raise UsageError(
                f"{agent.name} declares no skill {request.skill!r} (its skills: {known})",
                "unknown_skill",
            )
        return DelegationOrder(
            agent=agent,
            skill=request.skill,
            payload=request.input,
            timeout=request.timeout,
            cancel_after=request.cancel_after,
            principal=request.principal,
            tenant=request.tenant,
            return_contract=delegation_contract(request.return_schema),
        )

    async def delegate(
        self,
        order: DelegationOrder,
        interruption: Interruption | None = None,
        listener: Callable[[AuditEvent], None] | None = None,
    ) -> dict[str, Any]:
        """One handoff, driven here until it ends (or ``interruption`` cancels its run),
        each of its events told to ``listener`` as it happens; returns the run document."""
        keys = identity.coordinator_keys(self.ws.data)
        _, _, document = await delegate_once(
            order, keys, identity.issuer_id(), self.ws, self.client, interruption, listener
        )
        return document  # written with the handoff's outcome, in one transaction

    def submit(self, order: DelegationOrder, key: SubmissionKey | None = None) -> Submitted:
        """Admit and record one handoff for the background workers to drive; once under
        ``key``. See :mod:`coordinator.dispatch.submit`."""
        return Submitted(**submit_for_workers(self.ws, order, key))

    async def cancel(self, run_id: str, reason: str | None, by: str) -> dict[str, Any]:
        """Cancel every live branch of a run, from this process (whichever drives it);
        the run's document afterwards. See :mod:`coordinator.service.cancel`."""
        from coordinator.service.cancel import cancel_run

        keys = identity.coordinator_keys(self.ws.data)
        why = reason or "no reason given"
        async with contextlib.AsyncExitStack() as stack:
            client = self.client
            if client is None:
                client = await stack.enter_async_context(A2AClient())
            return await cancel_run(
                self.ws, keys, identity.issuer_id(), run_id, by=by, why=why, client=client
            )

    async def revoke(self, target: str, reason: str | None, by: str) -> dict[str, Any]:
        """Revoke the grants of a run or a handoff (:mod:`coordinator.service.revoke`)."""
        from coordinator.service.revoke import revoke

        keys = identity.coordinator_keys(self.ws.data)
        why = reason or "no reason given"
        return await revoke(self.ws, keys, identity.issuer_id(), target, by=by, why=why)

    def save(self, run: Run, document: dict[str, Any]) -> None:
        run.save(document)

    # --- the pilot assessment, against a remote_risk process started for it ----------------

    async def demo(
        self, cases: Sequence[str], *, parallel: bool = False
    ) -> tuple[str, list[PilotResult]]:
        from coordinator.assessment.demo import prepare_trust, remote_risk_process, run_demo

        trust = prepare_trust(self.ws.data)
        with remote_risk_process(trust.remote_args) as base_url:
            results = await run_demo(
                self.ws.data, base_url, list(cases), trust, parallel=parallel, ws=self.ws
            )
        return base_url, results

    def chain_demo(self) -> ChainResult:
        """The chain case: the coordinator's API on this data directory (and database), the
        privacy team's member sub-delegating to the legal team's, each its own process."""
        from coordinator.assessment.chain_case import run_chain_case

        environ = dict(os.environ)
        if self.ws.database_url:
            environ[DATABASE_ENV] = self.ws.database_url
        return run_chain_case(self.ws.data.root, environ)

    async def supervised_demo(
        self, cases: Sequence[str], model: ModelConfig, *, parallel: bool = False
    ) -> tuple[str, list[SupervisedResult]]:
        from coordinator.assessment import evaluate
        from coordinator.assessment.demo import prepare_trust, remote_risk_process

        trust = prepare_trust(self.ws.data)
        with remote_risk_process(trust.remote_args) as base_url:
            results = await evaluate.model_demo(
                self.ws.data, self.ws, base_url, trust, model, cases, parallel=parallel
            )
        return base_url, results

    def evaluate(self, model: ModelConfig | None, repeat: int) -> list[Row]:
        from coordinator.assessment import evaluate

        return evaluate.run_evaluation(self.ws.data, self.ws, model, repeat)

    # --- workers and recovery ---------------------------------------------------------------

    def worker(self, lease_seconds: float) -> Worker:
        from coordinator.recovery.worker import Worker

        keys = identity.coordinator_keys(self.ws.data)
        return Worker(self.ws, keys, identity.issuer_id(), lease_seconds=lease_seconds)

    async def recover(self) -> list[RemoteOutcome]:
        from coordinator.recovery.recover import recover

        keys = identity.coordinator_keys(self.ws.data)
        return await recover(self.ws, keys, identity.issuer_id())

    # --- keys --------------------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        """The public signing keys remotes pin. The first call creates the coordinator's
        key: this is how an operator bootstraps the identity a remote will trust."""
        return identity.coordinator_keys(self.ws.data).public_jwks()

    # --- runs and audit ---------------------------------------------------------------------

    def runs(self, query: RunQuery | None = None) -> RunList:
        rows, cursor = run_list.page(self.ws.run_store(), query or RunQuery())
        return RunList.model_validate({"runs": rows, "next_cursor": cursor})

    def run(self, run_id: str) -> dict[str, Any]:
        """The run's document with its state as its handoff records stand now, whichever
        process drives it (see :mod:`coordinator.handoff.run_state`); each artifact with its
        content as kept (see :mod:`.artifact_content`)."""
        store = self.ws.run_store()
        document = run_state.current(_stored_document(store, run_id), store.run_records(run_id))
        document = self._with_chain(store, document, run_id)
        return artifact_content.with_content(document, artifact_content.kept(store, run_id))

    def _with_chain(self, store: RunStore, document: dict[str, Any], run_id: str) -> dict[str, Any]:
        """The document with the hops of its delegation chains (``chain``), read from the
        ledger when the run's grants show a token exchange."""
        exchanged = [g for g in store.rows("grants", run_id) if is_exchanged(g["attempt_id"])]
        if not exchanged:
            return document
        return {**document, "chain": reconstruct(self.ws.ledger().events(run_id))["hops"]}

    def artifact(self, run_id: str, number: int) -> str:
        """The exact text of the run's ``number``-th artifact as kept, its hash checked."""
        store = self.ws.run_store()
        document = _stored_document(store, run_id)
        return artifact_content.whole(document, artifact_content.kept(store, run_id), number)

    def audit_verify(self, bundle: dict[str, Any] | None = None) -> VerifyView:
        """The ledger, or a bundle checked against this coordinator's own keys and the
        keys pinned for its remotes (never the keys the bundle carries)."""
        if bundle is not None:
            return verify_view(verify_document(bundle, self._own_anchors()))
        keys = identity.coordinator_keys(self.ws.data).public_jwks()
        return verify_view(ledger.verify(self.ws.engine(), keys=keys))

    def _own_anchors(self) -> Anchors:
        pinned = [agent.pinned_jwks for agent in Registry(self.ws.data).agents()]
        return Anchors.of(
            [identity.coordinator_keys(self.ws.data).public_jwks()],
            [jwks for jwks in pinned if jwks and jwks.get("keys")],
        )

    def audit_show(self, run_id: str) -> dict[str, Any]:
        return reconstruct(self._events(run_id))

    def audit_export(self, run_id: str) -> dict[str, Any]:
        self._events(run_id)
        private_key = identity.coordinator_keys(self.ws.data).active.private_key
        if not isinstance(private_key, Ed25519PrivateKey):
            raise UsageError(
                "exporting a bundle needs an Ed25519 coordinator key", "key_unsupported"
            )
        return ledger.export_bundle(
            self.ws.ledger(), run_id, private_key, issuer=identity.issuer_id()
        )

    def audit_prove(self, run_id: str) -> dict[str, Any]:
        """The run's proof bundle against a tree head signed now (``audit prove``)."""
        self._events(run_id)
        keys = identity.coordinator_keys(self.ws.data)
        agents = Registry(self.ws.data).agents()
        return proofs.prove_run(
            self.ws.ledger(),
            run_id,
            self._ledger_key(),
            issuer=identity.issuer_id(),
            keys=keys.public_jwks(),
            remote_keys=[key for agent in agents for key in agent.pinned_jwks.get("keys", [])],
            successions=[jws for agent in agents for jws in agent.successions],
        )

    def audit_consistency(self, first: str | int, second: str | int) -> dict[str, Any]:
        """Whether one signed tree head extends the other (``audit consistency``); each
        is a compact JWS or the tree size of a head kept in this ledger."""
        jwks = identity.coordinator_keys(self.ws.data).public_jwks()
        heads = [tree_heads.named_head(self.ws.engine(), head, jwks) for head in (first, second)]
        return proofs.prove_consistency(self.ws.ledger(), *heads)

    def latest_tree_head(self) -> dict[str, Any] | None:
        """The newest tree head signed over this ledger (``None`` before the first)."""
        head = tree_heads.TreeHeadStore(self.ws.engine()).latest_signed()
        return head.as_dict() if head is not None else None

    def refuse_pending(self, name: str) -> AgentView:
        """Drop the card held for ``name``, keeping the registered one (recorded)."""
        registry = Registry(self.ws.data, self.ws.trail("operator"))
        return agent_view(registry.refuse_pending(name))

    def audit_reconcile(self, run_id: str) -> dict[str, Any]:
        """Whether both sides of each of the run's handoffs agree, and each side's log
        extends the heads the other holds (``audit reconcile``; see
        :mod:`coordinator.service.reconcile`). Each agent is asked with the audit
        credential registered for it (``set_audit_credential``), at its pinned origin."""
        self._events(run_id)
        ws_ledger = self.ws.ledger()
        jwks = identity.coordinator_keys(self.ws.data).public_jwks()
        current = proofs.sign_current_head(
            ws_ledger, self._ledger_key(), issuer=identity.issuer_id(), keys=jwks
        )
        agents = Registry(self.ws.data).agents()
        checks = reconcile.Reconciliation(ws_ledger, AuditCredentials(self.ws.data), jwks, current)
        handoffs = []
        facts = [(reconcile.our_facts(ws_ledger, run_id), False)]
        facts.append((reconcile.hop_facts(ws_ledger, run_id), True))  # each chain's hops
        for found, hop in facts:
            for handoff_id, ours in sorted(found.items()):
                agent = reconcile.target_of(ours, agents)
                if agent is None or not declares_receipts(agent):
                    handoffs.append(reconcile.skipped(handoff_id, ours, agent))
                else:
                    handoffs.append(checks.handoff(handoff_id, agent, ours, hop))
        return {
            **reconcile_verdict.report(run_id, handoffs, checks.witnesses()),
            "tree_head": current.as_dict(),
            **reconcile.ignored_environment(os.environ),
        }

    def set_audit_credential(self, name: str, token: str) -> dict[str, Any]:
        """Tie an audit token to one registered agent, sent only to the origin it is
        registered from (``agents audit-credential``); recorded, the token never is."""
        agent = Registry(self.ws.data).get(name)
        credential = AuditCredentials(self.ws.data).set(agent, token)
        trail = self.ws.trail("operator")
        trail.emit("audit_credential.set", data=credential.described())
        trail.flush()
        return {**credential.described(), "set": True}

    def remove_audit_credential(self, name: str) -> dict[str, Any]:
        """Forget the audit token of ``name`` (recorded)."""
        removed = AuditCredentials(self.ws.data).remove(name)
        if removed:
            trail = self.ws.trail("operator")
            trail.emit("audit_credential.removed", data={"agent": name})
            trail.flush()
        return {"agent": name, "set": False, "removed": removed}

    def _ledger_key(self) -> Ed25519PrivateKey:
        private_key = identity.coordinator_keys(self.ws.data).active.private_key
        if not isinstance(private_key, Ed25519PrivateKey):
            raise UsageError(
                "signing a tree head needs an Ed25519 coordinator key", "key_unsupported"
            )
        return private_key

    def _events(self, run_id: str) -> list[ledger.StoredEvent]:
        events = self.ws.ledger().events(run_id)
        if not events:
            raise UsageError(f"the ledger has no events of run {run_id!r}", "unknown_run")
        return events
