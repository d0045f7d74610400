"""What a coordinator can be asked to do, in one place for the CLI and the HTTP API.

Both the command line (working directly on a data directory) and ``federation serve
coordinator`` (a long-lived process) call these methods, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coordinator.audit import ledger
from coordinator.audit.trail import reconstruct
from coordinator.authority import identity
from coordinator.authority.delegator import RunAuthority, required_scopes
from coordinator.dispatch.delegate import DelegationOrder, delegate_once, delegation_document
from coordinator.dispatch.driver import WaitPolicy, propose
from coordinator.errors import UsageError
from coordinator.handoff.run import Run
from coordinator.remote.client import A2AClient
from coordinator.remote.registry import RegisteredAgent, Registration, Registry, TrustAnchor
from coordinator.service.workspace import Workspace
from coordinator.storage.runs import GENERIC_CONTRACT


@dataclass
class CoordinatorService:
    ws: Workspace
    # A long-lived process sets one pooled client for all its delegations (see api.py).
    client: A2AClient | None = None

    # --- specialists ----------------------------------------------------------------------

    async def register(
        self,
        url: str,
        name: str | None = None,
        skill: str | None = None,
        anchor: TrustAnchor | None = None,
        approve: bool = False,
    ) -> Registration:
        async with A2AClient() as client:
            registry = Registry(self.ws.data, self.ws.trail("operator"), self.ws.run_store())
            return await registry.register(client, url, name, skill, anchor, approve)

    def agents(self) -> list[RegisteredAgent]:
        return Registry(self.ws.data).agents()

    def agent(self, name: str) -> RegisteredAgent:
        return Registry(self.ws.data).get(name)

    # --- delegation -----------------------------------------------------------------------

    async def delegate(self, order: DelegationOrder) -> dict[str, Any]:
        """One handoff, driven here until it ends; returns the run document."""
        keys = identity.coordinator_keys(self.ws.data)
        store = self.ws.run_store()
        run, outcome = await delegate_once(
            order, keys, identity.issuer_id(), self.ws.trail(), store, self.client
        )
        document = delegation_document(run, outcome)
        self.save(run, document)
        return document

    def submit(self, order: DelegationOrder) -> dict[str, Any]:
        """Admit and record one handoff for the background workers to drive.

        Nothing is sent here; whichever coordinator process claims the handoff's lease row
        first sends it. A refused admission is answered at once.
        """
        from coordinator.dispatch.driver import admission_context

        store = self.ws.run_store()
        scopes = required_scopes(order.agent.agent_card, order.skill) or frozenset({"a2a:delegate"})
        authority = RunAuthority(principal=order.principal, tenant=order.tenant, scopes=scopes)
        run = Run(
            owner="operator",
            authority=authority,
            trail=self.ws.trail(),
            store=store,
            kind="delegation",
        )
        wait = WaitPolicy(deadline_seconds=order.timeout)
        record = run.book.admit(
            propose(run, order.agent, order.skill, order.payload, wait),
            admission_context(run, order.agent),
        )
        store.save_payload(record, order.payload, GENERIC_CONTRACT)
        run.trail.flush()
        # The row was held by this process while it was written; hand it to the workers.
        if run.book.driver is not None:
            store.release(run.book.driver, record.attempt_id)
        document = {
            "run_id": run.run_id,
            "attempt_id": record.attempt_id,
            "state": record.state.value,
        }
        self.save(
            run,
            {
                "run_id": run.run_id,
                "owner": run.owner,
                "branches": [],
                "live_branches": [record.attempt_id],
            },
        )
        return document

    def save(self, run: Run, document: dict[str, Any]) -> None:
        if run.store is None:
            run.store = self.ws.run_store()
        run.save(document)

    # --- runs and audit ---------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        return self.ws.run_store().run_documents()

    def run(self, run_id: str) -> dict[str, Any]:
        row = self.ws.run_store().run(run_id)
        if row is None:
            raise UsageError(f"no run {run_id!r} in the database", "unknown_run")
        document: dict[str, Any] = row["document"]
        return document

    def audit_verify(self, bundle: dict[str, Any] | None = None) -> ledger.VerifyReport:
        if bundle is not None:
            return ledger.verify_bundle(bundle)
        return ledger.verify(self.ws.engine())

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

    def _events(self, run_id: str) -> list[ledger.StoredEvent]:
        events = self.ws.ledger().events(run_id)
        if not events:
            raise UsageError(f"the ledger has no events of run {run_id!r}", "unknown_run")
        return events
