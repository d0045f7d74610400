"""One database writer thread per process: blocking work off the event loop, in order.

A service's event loop must never wait on its database: on PostgreSQL a query waits on
the network and on locks other sessions hold, and on SQLite a write waits for the file's
write lock (up to the busy timeout). A :class:`Writer` is one daemon thread fed by a
queue. The loop hands it a job and awaits the job's future (:meth:`Writer.run`), so
other requests of the process go on meanwhile; code that is not a coroutine can wait
for the same job (:meth:`Writer.call`), which keeps the order of writes one order.

**Group commit.** Jobs that share a ``batch`` function are committed together: the
thread takes what is queued behind the first such job (at most ``max_batch``; when the
previous batch had company it also waits up to ``max_wait`` seconds for more, so a lone
caller never waits for company that is not there) and hands all of
their items to ``batch`` in one call, which commits them in one transaction and returns
one outcome per item (a value, or the exception that item alone raised). Each caller
continues only when its own item is durable. Batch sizes reached are kept in
:attr:`Writer.batch_sizes` (a count per size), for the benchmark and the metrics.

**One hand-over a turn.** Items awaited on an event loop (:meth:`Writer.commit`) are
handed to the thread when the loop's current turn ends, all that turn's together, and
their outcomes come back to that loop together, one wake-up each way for a group instead
of one for each item. Handed over one by one, the first item woke the thread while the
loop still had work in its turn: the thread waited for the interpreter's lock until it
forced a switch, committed that item alone, and the next item waited for the next
commit. Nothing awaiting an item goes on before it is committed, so the order of writes,
what a crash leaves and what a caller sees are as before.

**In place when nothing waits.** On SQLite a turn's items can be committed on the
loop's own thread, where the turn ends, when the writer has nothing queued or running and
the database's write lock is free at once (:attr:`Writer.in_place` says how: see
:mod:`agent_cards.storage.in_place`). Then no hand-over happens at all:
the items' transaction costs the loop what it would cost the thread, without the two
wake-ups and the interpreter's lock changing hands. Whenever the lock is taken (by
another process, say) the items go to the thread as before, so the loop never waits on
the database; and whenever the thread has work, they queue behind it, so the order of
writes is one order. An item the batch reports it could not begin alone (a group retried
item by item) goes to the thread by itself. Work such a batch hands the writer and waits
for runs where the batch runs, as on the thread. Every so many batches in place, the
thread takes their upkeep (SQLite's checkpoint, which a commit in place does not make).

Why a thread and not an async driver: measured with ``python -m bench.db_paths``
(README, "Benchmarks"): the database calls of both services are a handful of short
statements per transaction, and an async driver pays a thread hop (aiosqlite) or a
coroutine round per statement where one hop per transaction is enough; one writer also
serialises writers in the process instead of letting them queue on the database's lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import queue
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agent_cards.storage.in_place import InPlace, WouldWait

T = TypeVar("T")
Item = TypeVar("Item")

Batch = Callable[[Sequence[Any]], Sequence[Any]]
"""Commits several items in one transaction; one outcome (a value or an exception) each."""

_LOG = logging.getLogger(__name__)

DEFAULT_MAX_BATCH = 64
DEFAULT_MAX_WAIT_SECONDS = 0.0015


@dataclass(slots=True)
class _Job(Generic[T]):
    """One job and where its outcome goes: a concurrent future (a caller outside the
    event loop waits on it) or the awaiting coroutine's own asyncio future."""

    future: Future[T] | asyncio.Future[T]
    run: Callable[[], T] | None = None
    batch: Batch | None = None
    item: Any = None
    key: Any = None


@dataclass
class Writer:
    """The process's writer thread (started on first use; a daemon, so it never holds up
    an exit; :meth:`close` stops it after the queued jobs)."""

    name: str = "database-writer"
    max_batch: int = DEFAULT_MAX_BATCH
    max_wait: float = DEFAULT_MAX_WAIT_SECONDS
    batch_sizes: Counter[int] = field(default_factory=Counter)
    # how often a caller outside the thread waited in place (call, commit_now): each one
    # is a thread that was not serving while the database worked
    waits_in_place: int = 0
    # how to commit a batch on the loop's own thread (see agent_cards.storage.in_place);
    # None: every batch goes to the thread
    in_place: InPlace | None = None
    # batches committed in place, on the loop's thread, and how often one would have waited
    batches_in_place: int = 0
    would_have_waited: int = 0
    _queue: queue.SimpleQueue[_Job[Any] | None] = field(default_factory=queue.SimpleQueue)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # held by whoever writes (the thread, or a loop in place); jobs queued or running
    _writing: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0
    _in_place_by: threading.Thread | None = None
    _held: _Job[Any] | None = None
    _last_batch: int = 1
    # each running loop's items awaited during its current turn, handed over at its end
    _turns: dict[asyncio.AbstractEventLoop, list[_Job[Any]]] = field(default_factory=dict)

    # --- handing work over ------------------------------------------------------------

    def submit(self, run: Callable[[], T]) -> Future[T]:
        """Queue ``run`` (called alone, in the writer thread, in a copy of the caller's
        context variables, as ``asyncio.to_thread`` does); its future."""
        future: Future[T] = Future()
        self._put(_Job(future, run=_in_context(run)))
        return future

    def submit_item(self, batch: Batch, item: Any, key: Any = None) -> Future[Any]:
        """Queue ``item`` for ``batch``, committed with the items queued beside it that
        have the same ``key`` (by default: the same ``batch``); the first one's ``batch``
        commits them all."""
        future: Future[Any] = Future()
        self._put(_Job(future, batch=batch, item=item, key=key or batch))
        return future

    async def run(self, run: Callable[[], T]) -> T:
        """:meth:`submit`, awaited: the event loop goes on while the job runs."""
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._put(_Job(waiter, run=_in_context(run)))
        return await waiter

    async def commit(self, batch: Batch, item: Any, key: Any = None) -> Any:
        """:meth:`submit_item`, awaited: returns once this item is committed.

        The writer thread hands the outcome straight to this coroutine's own future (one
        ``call_soon_threadsafe``), not through a concurrent future chained to an asyncio
        one (``asyncio.wrap_future``): the same outcome, at about a third of the cost of
        a durable point's round trip. The item is handed over when the loop's turn ends,
        with the others of that turn (see the module's "One hand-over a turn"). A caller
        that gives up (cancelled) leaves its item to be committed as before; nothing is
        handed back to it."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._at_turn_end(loop, _Job(waiter, batch=batch, item=item, key=key or batch))
        return await waiter

    def call(self, run: Callable[[], T]) -> T:
        """:meth:`submit` and wait (for callers that are not coroutines); from the writer
        thread itself (or from a batch it commits in place) the job runs at once."""
        if self._writing_here():
            return run()
        self.waits_in_place += 1
        return self.submit(run).result()

    def commit_now(self, batch: Batch, item: Any, key: Any = None) -> Any:
        """:meth:`submit_item` and wait (for callers that are not coroutines)."""
        if self._writing_here():
            return _outcome(batch([item])[0])
        self.waits_in_place += 1
        return self.submit_item(batch, item, key).result()

    def _writing_here(self) -> bool:
        """Whether this thread is the one writing now (the writer's thread, or a loop's
        committing in place): a job it waited for would wait for itself."""
        current = threading.current_thread()
        return current is self._thread or current is self._in_place_by

    def close(self) -> None:
        self._end_turn(_running_loop())
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _at_turn_end(self, loop: asyncio.AbstractEventLoop, job: _Job[Any]) -> None:
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = []
            loop.call_soon(self._end_turn, loop, True)
        turn.append(job)

    def _end_turn(self, loop: asyncio.AbstractEventLoop | None, at_end: bool = False) -> None:
        """Hand over what ``loop`` (none: nothing) awaited during its turn, in order; at
        the turn's very end (no caller's transaction open around it), commit it in place
        if it can be."""
        if loop is None:
            return
        jobs = self._turns.pop(loop, [])
        if at_end and jobs and self._committed_in_place(jobs):
            return
        for job in jobs:
            self._enqueue(job)

    def _committed_in_place(self, jobs: list[_Job[Any]]) -> bool:
        """Commit ``jobs`` (one batch's, awaited on this loop) right here, if nothing is
        queued or running and the batch can begin without waiting; whether it did."""
        first = jobs[0]
        if self.in_place is None or len(jobs) > self.max_batch:
            return False
        if any(job.batch is None or job.key != first.key for job in jobs):
            return False
        with self._lock:
            if self._in_flight or not self._writing.acquire(blocking=False):
                return False
        self._in_place_by = threading.current_thread()
        try:
            with self.in_place.begin():
                outcomes = list(first.batch([job.item for job in jobs]))  # type: ignore[misc]
        except WouldWait:
            self.would_have_waited += 1
            return False
        except BaseException as exc:
            outcomes = [exc] * len(jobs)
        finally:
            self._in_place_by = None
            self._writing.release()
        self._counted_in_place(len(jobs))
        for job, outcome in zip(jobs, outcomes, strict=True):
            waiter = job.future
            assert isinstance(waiter, asyncio.Future)  # a turn's jobs are awaited on it
            if isinstance(outcome, WouldWait):  # that item alone was not written: the
                self._enqueue(job)  # thread takes it (a batch that retried item by item)
            elif isinstance(outcome, BaseException):
                _resolve(waiter, None, outcome)
            else:
                _resolve(waiter, outcome, None)
        return True

    def _counted_in_place(self, size: int) -> None:
        """Count a batch committed in place; every so many, its upkeep to the thread."""
        self.batches_in_place += 1
        self.batch_sizes[size] += 1
        upkeep, every = self.in_place.upkeep, self.in_place.upkeep_every  # type: ignore[union-attr]
        if upkeep is not None and self.batches_in_place % every == 0:
            self._enqueue(_Job(Future(), run=functools.partial(_upkeep, upkeep)))

    def _put(self, job: _Job[Any]) -> None:
        """Queue ``job`` behind what this thread's loop awaited before it."""
        self._end_turn(_running_loop())
        self._enqueue(job)

    def _enqueue(self, job: _Job[Any]) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._in_flight += 1
        self._queue.put(job)

    # --- the thread ---------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            if job.batch is None:
                with self._writing:
                    _settle(job, job.run)
                self._done(1)
            else:
                self._done(self._run_batch(job))

    def _done(self, jobs: int) -> None:
        with self._lock:
            self._in_flight -= jobs

    def _next(self) -> _Job[Any] | None:
        if self._held is not None:
            job, self._held = self._held, None
            return job
        return self._queue.get()

    def _run_batch(self, first: _Job[Any]) -> int:
        """Commit ``first`` with what is queued behind it; how many jobs that was."""
        jobs = self._gather(first)
        self.batch_sizes[len(jobs)] += 1
        self._last_batch = len(jobs)
        try:
            with self._writing:
                outcomes = list(first.batch([job.item for job in jobs]))  # type: ignore[misc]
        except BaseException as exc:
            for job in jobs:
                _fail(job, exc)
            return len(jobs)
        _settle_all(jobs, outcomes)
        return len(jobs)

    def _gather(self, first: _Job[Any]) -> list[_Job[Any]]:
        """``first`` and the jobs queued behind it for the same batch function; lingers up
        to ``max_wait`` for more only when the previous batch had company."""
        jobs = [first]
        linger = self.max_wait if self._last_batch > 1 else 0.0
        deadline = time.monotonic() + linger
        while len(jobs) < self.max_batch:
            if not linger and self._queue.empty():
                break  # nothing queued and no waiting for company: as get(timeout=0) finds
            try:
                job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None or job.batch is None or job.key != first.key:
                self._held = job
                if job is None:
                    self._queue.put(None)
                    self._held = None
                break
            jobs.append(job)
        return jobs


def _upkeep(upkeep: Callable[[], object]) -> None:
    """Run ``upkeep``; no caller waits for it, so a failure is logged, not raised."""
    try:
        upkeep()
    except Exception:
        _LOG.warning("the database writer's upkeep failed", exc_info=True)


def _settle(job: _Job[Any], run: Callable[[], Any] | None) -> None:
    assert run is not None
    try:
        value = run()
    except BaseException as exc:
        _fail(job, exc)
    else:
        _set(job, value)


def _settle_all(jobs: Sequence[_Job[Any]], outcomes: Sequence[Any]) -> None:
    """Each job's outcome to its caller; those awaited on a loop, a loop at once."""
    awaited: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for job, outcome in zip(jobs, outcomes, strict=True):
        failed = isinstance(outcome, BaseException)
        if isinstance(job.future, asyncio.Future):  # handed back below, a loop at once
            resolved = (job.future, None, outcome) if failed else (job.future, outcome, None)
            awaited.setdefault(job.future.get_loop(), []).append(resolved)
        elif failed:
            _fail(job, outcome)
        else:
            _set(job, outcome)
    for loop, handed in awaited.items():
        _hand_back_all(loop, handed)


def _in_context(run: Callable[[], T]) -> Callable[[], T]:
    return functools.partial(contextvars.copy_context().run, run)


def _set(job: _Job[Any], value: Any) -> None:
    future = job.future
    if isinstance(future, asyncio.Future):
        _hand_back(future, value, None)
        return
    with contextlib.suppress(Exception):  # a caller that gave up (cancelled) is gone
        future.set_result(value)


def _fail(job: _Job[Any], exc: BaseException) -> None:
    future = job.future
    if isinstance(future, asyncio.Future):
        _hand_back(future, None, exc)
        return
    with contextlib.suppress(Exception):
        future.set_exception(exc)


Outcome = tuple[asyncio.Future[Any], Any, BaseException | None]
"""An awaiting coroutine's future and what resolves it: a value, or an exception."""


def _hand_back(waiter: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    _hand_back_all(waiter.get_loop(), [(waiter, value, exc)])


def _hand_back_all(loop: asyncio.AbstractEventLoop, outcomes: Sequence[Outcome]) -> None:
    """Resolve awaiting coroutines' futures from the writer thread, in their loop, in one
    wake-up of it (what ``asyncio.wrap_future`` did through a concurrent future, one at a
    time: a closed loop gets nothing)."""
    if loop.is_closed():
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(_resolve_all, outcomes)


def _resolve_all(outcomes: Sequence[Outcome]) -> None:
    for waiter, value, exc in outcomes:
        _resolve(waiter, value, exc)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _resolve(waiter: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if waiter.done():  # a caller that gave up (cancelled) is gone
        return
    if exc is None:
        waiter.set_result(value)
    else:
        waiter.set_exception(_as_asyncio(exc))


def _as_asyncio(exc: BaseException) -> BaseException:
    """concurrent.futures' own cancellation and state errors as asyncio's, as
    ``asyncio.wrap_future`` hands them over."""
    if isinstance(exc, concurrent.futures.CancelledError):
        return asyncio.CancelledError(*exc.args)
    if isinstance(exc, concurrent.futures.InvalidStateError):
        return asyncio.InvalidStateError(*exc.args)
    return exc


def _outcome(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


_WRITERS: weakref.WeakKeyDictionary[Any, Writer] = weakref.WeakKeyDictionary()
_WRITERS_LOCK = threading.Lock()


def writer_of(database: Any, name: str = "database-writer") -> Writer:
    """The process's one writer for ``database`` (an engine, say), made on first use."""
    with _WRITERS_LOCK:
        writer = _WRITERS.get(database)
        if writer is None:
            writer = _WRITERS[database] = Writer(name=name)
        return writer
