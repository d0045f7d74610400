"""The background work of a long-lived coordinator: drive in-flight handoffs to their end.

Every pass claims the handoffs that no live process drives (their lease row is free or
its lease ran out), drives each concurrently, renews each lease while driving it, and
releases it when done. If a renewal finds that another process has taken the handoff,
this process stops driving it at once, so a handoff has one driver at a time. When the
process dies, its leases simply run out and another coordinator on the same database
picks its handoffs up.
"""

from __future__ import annotations

import asyncio
import contextlib

from agent_cards.keys import KeySet
from coordinator.dispatch.driver import WaitPolicy
from coordinator.recovery.recover import driver_id, resume
from coordinator.remote.client import A2AClient
from coordinator.remote.registry import Registry
from coordinator.storage.runs import RunStore
from coordinator.workspace import Workspace


class Worker:
    def __init__(
        self,
        ws: Workspace,
        keys: KeySet,
        issuer: str,
        *,
        driver: str | None = None,
        lease_seconds: float = 10.0,
        idle_seconds: float = 0.2,
        concurrency: int = 64,
        wait: WaitPolicy | None = None,
    ) -> None:
        self.ws = ws
        self.keys = keys
        self.issuer = issuer
        self.driver = driver or driver_id()
        self.lease_seconds = lease_seconds
        self.idle_seconds = idle_seconds
        self.concurrency = concurrency
        self.wait = wait or WaitPolicy(first_poll=0.05, max_poll=0.5)
        self.stopping = asyncio.Event()
        self.driven = 0

    async def run(self) -> None:
        """Work until :meth:`stop` is called."""
        # Lease operations run in threads, so they get a store of their own: the runs'
        # store defers its writes to their audit trails and belongs to the event loop.
        leases = self.ws.run_store()
        runs = self.ws.run_store()
        async with A2AClient() as client:
            while not self.stopping.is_set():
                claimed = await asyncio.to_thread(
                    leases.claim, self.driver, self.lease_seconds, self.concurrency
                )
                if claimed:
                    await asyncio.gather(*(self._drive(leases, runs, client, a) for a in claimed))
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), self.idle_seconds)

    def stop(self) -> None:
        self.stopping.set()

    async def _drive(
        self, leases: RunStore, runs: RunStore, client: A2AClient, attempt_id: str
    ) -> None:
        registry = Registry(self.ws.data)
        work = asyncio.ensure_future(
            resume(
                self.ws,
                runs,
                registry,
                client,
                self.keys,
                self.issuer,
                attempt_id,
                self.driver,
                self.wait,
                self.lease_seconds,
            )
        )
        try:
            while not work.done():
                done, _ = await asyncio.wait({work}, timeout=self.lease_seconds / 3)
                if done:
                    break
                if not await asyncio.to_thread(
                    leases.renew, self.driver, attempt_id, self.lease_seconds
                ):
                    work.cancel()  # another process holds the handoff now
            with contextlib.suppress(asyncio.CancelledError):
                await work
            self.driven += 1
        finally:
            await asyncio.to_thread(leases.release, self.driver, attempt_id)
