"""The background work of a long-lived coordinator: drive in-flight handoffs to their end.

A worker has ``concurrency`` slots. Whenever a slot is free it claims more handoffs that
no live process drives (their lease row is free, its lease ran out, or its driver is a
process of this host that no longer exists), up to the free slots, and drives each as its
own task: a short handoff never waits behind a long one claimed before it. Each drive
renews its lease every third of the lease and releases it when done; if a renewal finds
that another process has taken the handoff, this process stops driving it at once, so a
handoff has one driver at a time. When the process dies its leases run out (or, on the
same host, are freed as soon as a worker notices the process is gone) and another
coordinator on the same database picks its handoffs up: takeover is bounded by the lease
plus one idle interval.

Nothing here is left to fail unobserved: a drive that fails is logged and its lease
released; a claim or a lease step that fails (the database unavailable) is logged, the
pool is recycled, and the worker tries again after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from agent_cards.keys import KeySet
from coordinator.dispatch.attempt.driver import WaitPolicy
from coordinator.recovery.recover import driver_id, release_dead_drivers, resume
from coordinator.remote.cards.registry import Registry
from coordinator.remote.wire.client import A2AClient
from coordinator.storage.engine import checkpoint
from coordinator.storage.faults import is_storage_fault, recycle
from coordinator.storage.runs import RunStore
from coordinator.workspace import Workspace

logger = logging.getLogger("coordinator.recovery.worker")

# After a failed claim (e.g. the database unavailable) the worker waits this long.
RETRY_SECONDS = 1.0
# An idle worker truncates the SQLite WAL at most this often.
CHECKPOINT_EVERY_SECONDS = 60.0


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
        self._active: set[asyncio.Task[None]] = set()
        self._driving: dict[str, asyncio.Task[None]] = {}
        self._slot_freed = asyncio.Event()
        self._rescued_at = 0.0
        self._checkpointed_at = time.monotonic()

    async def run(self) -> None:
        """Work until :meth:`stop` is called; drives still running then are cancelled
        (their state is durable) and their leases released for another process."""
        # Lease operations run in threads, so they get a store of their own (each drive's
        # run has its own too: see resume).
        leases = self.ws.run_store()
        async with A2AClient() as client:
            try:
                while not self.stopping.is_set():
                    claimed = await self._claim(leases)
                    for attempt_id in claimed or []:
                        self._start(leases, client, attempt_id)
                    if not claimed or len(self._active) >= self.concurrency:
                        if not self._active:
                            await self._checkpoint_if_due()
                        await self._pause(RETRY_SECONDS if claimed is None else self.idle_seconds)
            finally:
                await self._stop_drives()

    def stop(self) -> None:
        self.stopping.set()

    async def _claim(self, leases: RunStore) -> list[str] | None:
        """Claim up to the free slots; None if the claim failed (logged)."""
        free = self.concurrency - len(self._active)
        if free <= 0:
            return []
        try:
            await self._rescue_dead_drivers(leases)
            driving = set(self._driving)
            return await asyncio.to_thread(
                leases.claim, self.driver, self.lease_seconds, free, driving
            )
        except Exception as exc:
            self._failed("claiming handoffs", exc)
            return None

    async def _checkpoint_if_due(self) -> None:
        """While idle, now and then, fold the SQLite WAL into the database and truncate it,
        so that an idle service's WAL does not keep its largest size."""
        now = time.monotonic()
        if now - self._checkpointed_at < CHECKPOINT_EVERY_SECONDS:
            return
        self._checkpointed_at = now
        try:
            await asyncio.to_thread(checkpoint, self.ws.engine())
        except Exception as exc:
            self._failed("checkpointing the WAL", exc)

    async def _rescue_dead_drivers(self, leases: RunStore) -> None:
        """Now and then, free the leases of drivers of this host whose process is gone, so
        their handoffs need not wait for the leases to run out."""
        now = time.monotonic()
        if now - self._rescued_at < self.lease_seconds / 2:
            return
        self._rescued_at = now
        freed = await asyncio.to_thread(release_dead_drivers, leases)
        if freed:
            logger.info("freed the leases of dead drivers %s", ", ".join(freed))

    def _start(self, leases: RunStore, client: A2AClient, attempt_id: str) -> None:
        drive = asyncio.create_task(self._drive(leases, client, attempt_id))
        self._active.add(drive)
        self._driving[attempt_id] = drive
        drive.add_done_callback(lambda done: self._finished(attempt_id, done))

    def _finished(self, attempt_id: str, drive: asyncio.Task[None]) -> None:
        self._active.discard(drive)
        if self._driving.get(attempt_id) is drive:
            del self._driving[attempt_id]
        self._slot_freed.set()

    async def _pause(self, seconds: float) -> None:
        """Wait until a slot frees, the worker stops, or ``seconds`` pass."""
        self._slot_freed.clear()
        if self.stopping.is_set():
            return
        stop = asyncio.ensure_future(self.stopping.wait())
        slot = asyncio.ensure_future(self._slot_freed.wait())
        try:
            await asyncio.wait({stop, slot}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stop, slot):
                waiter.cancel()

    async def _stop_drives(self) -> None:
        drives = list(self._active)
        for drive in drives:
            drive.cancel()
        await asyncio.gather(*drives, return_exceptions=True)

    async def _drive(self, leases: RunStore, client: A2AClient, attempt_id: str) -> None:
        registry = Registry(self.ws.data)
        work = asyncio.ensure_future(
            resume(
                self.ws,
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
                if not done and not await self._renew(leases, attempt_id):
                    work.cancel()  # another process holds the handoff now
            with contextlib.suppress(asyncio.CancelledError):
                await work
            self.driven += 1
        except asyncio.CancelledError:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            await self._release(leases, attempt_id)
            raise
        except Exception as exc:
            # The lease is kept until it runs out: a handoff that failed to drive is tried
            # again (here or elsewhere) after one lease, not in a tight loop.
            self._failed(f"driving {attempt_id}", exc)
            return
        await self._release(leases, attempt_id)

    async def _release(self, leases: RunStore, attempt_id: str) -> None:
        try:
            await asyncio.to_thread(leases.release, self.driver, attempt_id)
        except Exception as exc:  # the lease runs out by itself
            self._failed(f"releasing {attempt_id}", exc)

    async def _renew(self, leases: RunStore, attempt_id: str) -> bool:
        """Extend the lease; False only if another process holds the handoff. A renewal
        that fails for the database's sake keeps driving: the driver's own renewal, or
        the lease running out, decides."""
        try:
            return await asyncio.to_thread(
                leases.renew, self.driver, attempt_id, self.lease_seconds
            )
        except Exception as exc:
            self._failed(f"renewing the lease of {attempt_id}", exc)
            return True

    def _failed(self, what: str, exc: Exception) -> None:
        if is_storage_fault(exc):
            logger.warning("%s met a storage fault (%s); trying again", what, exc)
            recycle(self.ws.engine())
        else:
            logger.error("%s failed", what, exc_info=exc)
