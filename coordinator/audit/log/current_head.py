"""The ledger's latest signed tree head, kept current cheaply: the head each token carries.

:func:`sign_current_head <coordinator.audit.proofs.sign_current_head>` verifies the whole
ledger before it signs, a pass over every event: right for ``audit prove``, too slow for
every delegation token. :class:`CurrentHead` keeps, per ledger and process, the tree's
compact range (:class:`~agent_cards.transparency.merkle.RootBuilder`) and extends it
with the events appended since (by any process), checking each new event's hash over its
stored bytes and its link to the one before; so a head costs the new events, one
signature and one row in ``tree_heads``. The first use in a process builds the range from
the stored hashes (one read of one column). A new head is signed when the ledger grew and
the last one is at least :data:`MIN_INTERVAL_SECONDS` old; otherwise the last is shown
again without reading the ledger. Every head signed is kept, so ``audit verify`` checks
it against the ledger.

The event loop never reads the ledger for a token's head: before a handoff mints its
token, :func:`refreshed` brings a due head up to date in the process's database writer
(its row kept there), and the loop's own :meth:`CurrentHead.latest` (``wait=False``)
shows the last head while that read runs. Only when the loop finds the head due with no
refresh under way (the interval ran out between the two) does it sign one itself, its
row then kept with the token's own intent point.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Connection, Engine

from agent_cards.storage.writer import writer_of
from agent_cards.transparency import merkle
from coordinator.audit.log.events import GENESIS_HASH
from coordinator.audit.log.tree_heads import (
    SIGNED,
    TreeHead,
    TreeHeadStore,
    head_row,
    sign_tree_head,
)
from coordinator.errors import LedgerError
from coordinator.storage import driver
from coordinator.storage.schema import audit_events

MIN_INTERVAL_SECONDS = 1.0


class CurrentHead:
    """The compact range of one ledger's tree, and the last head signed over it.
    ``min_interval``: seconds a signed head is shown again before a new one is signed."""

    def __init__(self, engine: Engine, min_interval: float = MIN_INTERVAL_SECONDS) -> None:
        self._engine = engine
        self.min_interval = min_interval
        self._frontier: merkle.RootBuilder | None = None
        self._last_hash = GENESIS_HASH
        self._signed_at = float("-inf")
        # the last head and the signer it was signed for, replaced as one (read unlocked)
        self._shown: tuple[tuple[str, Ed25519PrivateKey], TreeHead] | None = None
        self._lock = threading.Lock()

    def latest(
        self,
        private_key: Ed25519PrivateKey,
        issuer: str,
        keep: Callable[[Callable[[Connection], None]], None] | None = None,
        *,
        wait: bool = True,
    ) -> TreeHead:
        """The latest head: signed now if the interval passed and the ledger grew (only
        then is the ledger read). A new head is kept at once, or, given ``keep``, handed
        its row to write with the caller's next durable point (a token's intent).
        ``wait=False``: while another thread brings the head up to date (see
        :func:`refreshed`), the last head signed for this signer is shown at once rather
        than after that thread's read of the ledger."""
        if not self._lock.acquire(blocking=wait):
            shown = self._head_for(private_key, issuer)
            if shown is not None:
                return shown
            self._lock.acquire()  # no head of this signer yet: one is made for it
        try:
            return self._latest(private_key, issuer, keep)
        finally:
            self._lock.release()

    def due(self, private_key: Ed25519PrivateKey, issuer: str) -> bool:
        """Whether :meth:`latest` would read the ledger now: there is no head for this
        signer yet, or the last is older than the interval."""
        fresh = time.monotonic() - self._signed_at < self.min_interval
        return not fresh or self._head_for(private_key, issuer) is None

    def _head_for(self, private_key: Ed25519PrivateKey, issuer: str) -> TreeHead | None:
        """The last head, if it was signed for this signer: a head is shown again only to
        the signer it was signed for; another key or issuer (a rotation, a second
        workspace key) gets its own, verifiable with it."""
        shown = self._shown
        return shown[1] if shown is not None and shown[0] == (issuer, private_key) else None

    def _latest(
        self,
        private_key: Ed25519PrivateKey,
        issuer: str,
        keep: Callable[[Callable[[Connection], None]], None] | None,
    ) -> TreeHead:
        last = self._head_for(private_key, issuer)
        if last is not None and not self.due(private_key, issuer):
            return last
        size = self._advance()
        if last is not None and last.tree_size == size:
            return last
        assert self._frontier is not None
        head = sign_tree_head(size, self._frontier.root(), private_key, issuer=issuer)
        if keep is None:
            TreeHeadStore(self._engine).keep(head)
        else:
            keep(head_row(head, head.iss, SIGNED, head.kid))
        self._shown, self._signed_at = ((issuer, private_key), head), time.monotonic()
        return head

    def _advance(self) -> int:
        if self._frontier is None:
            self._frontier = merkle.RootBuilder()
            with self._engine.connect() as connection:
                for batch in _hash_batches(connection):
                    self._frontier.add([bytes.fromhex(digest) for digest in batch])
                    self._last_hash = batch[-1]
            return self._frontier.size
        with self._engine.connect() as connection:
            size = {"size": self._frontier.size}
            rows = driver.execute(connection, _NEW_EVENTS_SQL, size).fetchall()
        for seq, prev_hash, digest, canonical in rows:
            self._check(int(seq), str(prev_hash), str(digest), str(canonical))
            self._frontier.push(merkle.leaf_hash(bytes.fromhex(str(digest))))
            self._last_hash = str(digest)
        return self._frontier.size

    def _check(self, seq: int, prev_hash: str, digest: str, canonical: str) -> None:
        assert self._frontier is not None
        if (
            seq != self._frontier.size + 1
            or prev_hash != self._last_hash
            or hashlib.sha256(canonical.encode("utf-8")).hexdigest() != digest
        ):
            raise LedgerError(
                f"event {seq} does not extend the ledger as it was: no head is signed",
                "ledger_broken",
            )


_HASHES_SQL = f"SELECT hash FROM {audit_events.name} ORDER BY seq"
# The events appended since the range was last extended (by any process), read by the
# driver's own cursor: a thousand rows or more a second under load, each a SQLAlchemy
# row object through Core at half again the cost.
_NEW_EVENTS_SQL = (
    f"SELECT seq, prev_hash, hash, canonical FROM {audit_events.name}"
    " WHERE seq > :size ORDER BY seq"
)


def _hash_batches(connection: Connection) -> Iterator[list[str]]:
    """The stored event hashes in order, in batches of :data:`merkle.CHUNK` (aligned, so
    that :meth:`RootBuilder.add` hashes whole chunks), read by the driver's own cursor."""
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(_HASHES_SQL)
        while rows := cursor.fetchmany(merkle.CHUNK):
            yield [str(digest) for (digest,) in rows]
    finally:
        cursor.close()


_heads: weakref.WeakKeyDictionary[Engine, CurrentHead] = weakref.WeakKeyDictionary()
_heads_lock = threading.Lock()


async def refreshed(engine: Engine, private_key: Ed25519PrivateKey, issuer: str) -> None:
    """Bring ``engine``'s head up to date for this signer, when it is due, in the
    process's database writer: the read-back of the events since the last head (a query
    and a hash each, once a second) then never holds the event loop. What goes wrong
    there is met again, and answered as always, by the caller's own :meth:`latest`."""
    head = current_head(engine)
    if head.due(private_key, issuer):
        with contextlib.suppress(Exception):
            await writer_of(engine).run(lambda: head.latest(private_key, issuer))


def current_head(engine: Engine) -> CurrentHead:
    """The one :class:`CurrentHead` of ``engine``'s ledger in this process."""
    with _heads_lock:
        head = _heads.get(engine)
        if head is None:
            head = _heads[engine] = CurrentHead(engine)
        return head
