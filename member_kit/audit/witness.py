"""The heads of other logs this service was shown: it witnesses the coordinator's ledger.

Every delegation token the coordinator mints carries its latest signed tree head
(``log_head``); the authorizer verifies it with the keys it pins for that issuer and
keeps it here under its signer: the RFC 7638 thumbprint computed from the key that
verified it (once per ``(signer, log, size, root)``: two heads of one size with
different roots are both kept, which is the evidence of a fork). ``audit reconcile``
reads back the heads of its own keys (``GET /audit/witnessed?signer=...``) and proves
its ledger consistent with each; another issuer's heads are filed under that issuer's
keys and never answered as this coordinator's.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from agent_cards.transparency.heads import Head, now_text
from member_kit.storage.engine import read_transaction, write_transaction
from member_kit.storage.schema import witnessed_heads


class WitnessedHeads:
    """Heads of other logs, kept in the database behind ``engine`` or in memory."""

    def __init__(self, engine: Engine | None = None) -> None:
        self._engine = engine
        self._memory: dict[tuple[str, str, int, str], Head] = {}
        self._lock = threading.Lock()

    def keep(self, head: Head, signer: str) -> None:
        """Keep a head already verified with a pinned key whose thumbprint is ``signer``."""
        key = (signer, head.iss, head.tree_size, head.root_hash)
        if self._engine is None:
            with self._lock:
                self._memory.setdefault(key, head)
            return
        row = {**head.as_dict(), "log_id": head.iss, "signer": signer, "recorded_at": now_text()}
        row.pop("iss")
        row.pop("issued_at")
        try:
            with write_transaction(self._engine) as connection:
                connection.execute(insert(witnessed_heads).values(**row))
        except IntegrityError:
            pass  # this very head is kept already

    def jws(self, signers: Collection[str] | None = None) -> list[str]:
        """The kept heads (their JWS) verified by a key of ``signers`` (None: every
        signer), smallest first."""
        if self._engine is None:
            with self._lock:
                kept = sorted(self._memory.items(), key=lambda i: (i[1].tree_size, i[1].root_hash))
            return [h.jws for (signer, *_), h in kept if signers is None or signer in signers]
        c = witnessed_heads.c
        query = select(c.jws).order_by(c.tree_size, c.root_hash)
        if signers is not None:
            query = query.where(c.signer.in_(sorted(signers)))
        with read_transaction(self._engine) as connection:
            return [str(jws) for (jws,) in connection.execute(query)]
