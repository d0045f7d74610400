"""The heads of other logs this service was shown: it witnesses the coordinator's ledger.

Every delegation token the coordinator mints carries its latest signed tree head
(``log_head``); the authorizer verifies it with the keys it pins for that issuer and
keeps it here (once per ``(log, size, root)``: two heads of one size with different
roots are both kept, which is the evidence of a fork). ``audit reconcile`` reads them
back from ``GET /audit/witnessed`` and proves its ledger consistent with each.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from agent_cards.transparency.heads import Head, now_text
from remote_risk.storage.engine import read_transaction, write_transaction
from remote_risk.storage.schema import witnessed_heads


class WitnessedHeads:
    """Heads of other logs, kept in the database behind ``engine`` or in memory."""

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine
        self._memory: dict[tuple[str, int, str], Head] = {}
        self._lock = threading.Lock()

    def keep(self, head: Head) -> None:
        """Keep a head already verified with the key pinned for its log's owner."""
        key = (head.iss, head.tree_size, head.root_hash)
        if self._engine is None:
            with self._lock:
                self._memory.setdefault(key, head)
            return
        row = {**head.as_dict(), "log_id": head.iss, "recorded_at": now_text()}
        row.pop("iss")
        row.pop("issued_at")
        try:
            with write_transaction(self._engine) as connection:
                connection.execute(insert(witnessed_heads).values(**row))
        except IntegrityError:
            pass  # this very head is kept already

    def jws(self, log_id: str | None = None) -> list[str]:
        """The kept heads (their JWS), of ``log_id`` or of every log, smallest first."""
        if self._engine is None:
            with self._lock:
                heads = sorted(self._memory.values(), key=lambda h: (h.tree_size, h.root_hash))
            return [h.jws for h in heads if log_id is None or h.iss == log_id]
        c = witnessed_heads.c
        query = select(c.jws).order_by(c.tree_size, c.root_hash)
        if log_id is not None:
            query = query.where(c.log_id == log_id)
        with read_transaction(self._engine) as connection:
            return [str(jws) for (jws,) in connection.execute(query)]
