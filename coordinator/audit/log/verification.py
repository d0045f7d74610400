"""``audit verify``: walk the whole ledger once and check the chain, the tree and every kept head.

For each event in sequence order the walk checks its number (no gap, no repeat), its
link (``prev_hash`` is the previous event's hash), its hash (SHA-256 of the stored RFC
8785 bytes), that the queryable columns still say what the hashed record says (inside
SQLite with ``json_extract``, in Python on PostgreSQL), and adds it to the Merkle tree
(leaf: ``SHA-256(0x00 || hash)``, RFC 9162 section 2.1.1), whose root it knows at every
size in ``O(log n)`` memory. At the size of each signed tree head kept in ``tree_heads``
the root must be the head's; a head beyond the end shows truncation. ``strict=True`` also
re-runs the RFC 8785 canonicaliser on every record.

What a chain cannot show on its own is that events were cut off its *end*; a signed
head (a chain head passed in, or a tree head kept or held by someone else) reveals it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import Connection, Engine, select

from agent_cards.transparency import merkle
from contracts import strict_json
from contracts.canonical import CanonicalizationError, canonical_json
from coordinator.audit.log.events import CORRELATION_FIELDS, GENESIS_HASH
from coordinator.audit.log.signing import verify_head
from coordinator.audit.log.tree_heads import (
    TreeHead,
    TreeHeadStore,
    key_for,
    read_unverified,
    verify_tree_head,
)
from coordinator.errors import LedgerError
from coordinator.storage.schema import audit_events

_EMPTY_ROOT = merkle.EMPTY_ROOT.hex()


class Break(StrEnum):
    """What is wrong at the first broken place of a chain, tree or bundle."""

    HASH_MISMATCH = "hash_mismatch"  # the event's content was edited
    PREV_MISMATCH = "prev_mismatch"  # the link to the previous event is wrong
    SEQUENCE_GAP = "sequence_gap"  # an event number is missing
    SEQUENCE_DUPLICATE = "sequence_duplicate"  # an event number occurs twice
    NOT_CANONICAL = "not_canonical"  # stored bytes are not RFC 8785 (strict mode)
    TRUNCATED = "truncated"  # the chain ends before a signed head
    HEAD_MISMATCH = "head_mismatch"  # the event a signed head names has another hash
    HEAD_INVALID = "head_invalid"  # the signed head does not verify
    ROOT_MISMATCH = "root_mismatch"  # the tree's root differs from a signed tree head's
    INCLUSION_INVALID = "inclusion_invalid"  # an inclusion proof does not yield the root
    INCONSISTENT = "inconsistent"  # a tree head does not extend another (a fork)
    RECEIPT_INVALID = "receipt_invalid"  # a remote's receipt does not verify or match
    TOKEN_MISMATCH = "token_mismatch"  # a token digest differs from the ledger's
    ATTESTATION_INVALID = "attestation_invalid"  # a bundle's signed digest does not match
    UNTRUSTED_KEY = "untrusted_key"  # signed with a key other than the trusted one
    MALFORMED = "malformed"  # a bundle that does not have the expected shape
    NO_ANCHOR = "no_anchor"  # a bundle checked with no key of the reader's: nothing proven
    RECEIPT_MISMATCH = "receipt_mismatch"  # a receipt contradicts the ledger it is kept in
    RECEIPT_ISSUER_MISMATCH = "receipt_issuer_mismatch"  # iss is not the signing key's identity
    ARTIFACT_MISSING = "artifact_missing"  # a receipt's artifacts are not in the bundle
    ARTIFACT_MISMATCH = "artifact_mismatch"  # artifacts differ from the receipt or ledger


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of a verification: ok, or the first broken event and what is wrong."""

    ok: bool
    checked: int
    last_seq: int
    last_hash: str
    seq: int | None = None
    kind: Break | None = None
    detail: str = ""
    root_hash: str = _EMPTY_ROOT
    tree_heads: int = 0
    # False for a bundle checked against its own keys: consistent, but nothing proven.
    anchored: bool = True
    # Key-succession statements a bundle carried that were followed (its receipts may be
    # signed by keys the reader holds only through them).
    successions: int = 0
    # What a bundle check did, for its reader: the steps, the kid (the RFC 7638
    # thumbprint) of the key that signed the head, the tokens matched, and each receipt
    # with the agent it came from and the key that verified it.
    steps: tuple[str, ...] = ()
    head_kid: str | None = None
    tokens: int = 0
    receipts: tuple[Mapping[str, Any], ...] = ()

    def __str__(self) -> str:
        if self.ok:
            heads = f", {self.tree_heads} signed tree heads" if self.tree_heads else ""
            text = (
                f"ok: {self.checked} events, head {self.last_seq} {self.last_hash[:16]}, "
                f"tree root {self.root_hash[:16]}{heads}{_followed(self.successions)}"
            )
            return text if self.anchored else f"{UNANCHORED} ({text})"
        if self.kind is Break.NO_ANCHOR:
            return f"refused: {self.kind} ({self.detail})"
        return f"broken at event {self.seq}: {self.kind} ({self.detail})"


UNANCHORED = "unanchored: structure only, nothing proven"


def _followed(count: int) -> str:
    if not count:
        return ""
    return f", remote keys extended by {count} key-succession statement(s)"


class BundleBroken(Exception):
    """The first failed step of a bundle check: where, which :class:`Break`, and why."""

    def __init__(self, seq: int, kind: Break, detail: str) -> None:
        super().__init__(detail)
        self.seq, self.kind, self.detail = seq, kind, detail

    def report(self) -> VerifyReport:
        return VerifyReport(False, 0, 0, GENESIS_HASH, self.seq, self.kind, self.detail)


class Links:
    """Checks numbering and links of a chain walked in sequence order."""

    def __init__(self) -> None:
        self.checked = 0
        self.last_seq = 0
        self.last_hash = GENESIS_HASH

    def step(self, seq: int, prev_hash: str, digest: str) -> VerifyReport | None:
        expected = self.last_seq + 1
        if seq != expected:
            if seq <= self.last_seq:
                return self.broken(seq, Break.SEQUENCE_DUPLICATE, "this number occurs again")
            return self.broken(expected, Break.SEQUENCE_GAP, f"missing; the next event is {seq}")
        if prev_hash != self.last_hash:
            return self.broken(
                seq, Break.PREV_MISMATCH, f"prev_hash does not match event {seq - 1}'s hash"
            )
        self.checked, self.last_seq, self.last_hash = seq, seq, digest
        return None

    def broken(self, seq: int, kind: Break, detail: str) -> VerifyReport:
        return VerifyReport(False, self.checked, self.last_seq, self.last_hash, seq, kind, detail)

    def ok(self, root_hash: str = _EMPTY_ROOT, tree_heads: int = 0) -> VerifyReport:
        return VerifyReport(
            True, self.checked, self.last_seq, self.last_hash, root_hash=root_hash,
            tree_heads=tree_heads,
        )  # fmt: skip


# The columns that repeat fields of the hashed record, so that they can be queried.
_COMPARED = ("seq", "prev_hash", *CORRELATION_FIELDS)
# SQLite parses the record in C, once per row (one ``json_extract`` of every path, as a
# JSON array, compared with the columns rendered the same way), so the Python loop only
# hashes. Only edits of the columns are at stake here: the record itself is covered by
# the hash chain.
_PATHS = ", ".join(f"'$.{name}'" for name in _COMPARED)
_AGREE = f"json_extract(canonical, {_PATHS}) = json_array({', '.join(_COMPARED)})"
_SQLITE_WALK = (
    f"SELECT seq, prev_hash, hash, CAST(canonical AS BLOB), {_AGREE} "
    f"FROM {audit_events.name} ORDER BY seq"
)
_compared_fields = itemgetter(*_COMPARED)
_raw_decode = json.JSONDecoder().raw_decode


Batch = list[tuple[Any, ...]]


def _agreement_in_python(rows: Sequence[Sequence[Any]]) -> Batch:
    """The same check in Python, for PostgreSQL, whose jsonb parsing is slower than ours."""
    batch = []
    for row in rows:
        try:
            record, _ = _raw_decode(row[3])
            agrees = _compared_fields(record) == tuple(row[4:])
        except (ValueError, KeyError, TypeError):
            agrees = False
        batch.append((row[0], row[1], row[2], row[3].encode("utf-8"), agrees))
    return batch


def _sqlite_batches(connection: Connection) -> Generator[Batch, None, None]:
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(_SQLITE_WALK)
        while batch := cursor.fetchmany(merkle.CHUNK):
            yield batch
    finally:
        cursor.close()


def _batches(connection: Connection) -> Generator[Batch, None, None]:
    """``(seq, prev_hash, hash, canonical as bytes, columns_agree)`` of every row, in
    order, in batches of :data:`merkle.CHUNK` rows (so that tree chunks stay aligned)."""
    if connection.dialect.name == "sqlite":
        yield from _sqlite_batches(connection)
        return
    c = audit_events.c
    query = select(c.seq, c.prev_hash, c.hash, c.canonical, *(c[n] for n in _COMPARED))
    options = {"yield_per": merkle.CHUNK}
    result = connection.execution_options(**options).execute(query.order_by(c.seq))
    try:
        for rows in result.partitions():
            yield _agreement_in_python(rows)
    finally:
        result.close()


def _column_break(connection: Connection, seq: int) -> str:
    """Which column of event ``seq`` disagrees with its hashed record."""
    row = connection.execute(select(audit_events).where(audit_events.c.seq == seq)).mappings().one()
    record = json.loads(row["canonical"])
    for name in _COMPARED:
        if record.get(name) != row[name]:
            return f"{name} is {row[name]!r} but the hashed record says {record.get(name)!r}"
    return "a column disagrees with the hashed record"


_COLUMNS_DISAGREE = "columns disagree with the hashed record"


def _is_canonical(body: bytes) -> bool:
    try:
        record = strict_json.loads(body)
        return (
            isinstance(record, dict)
            and isinstance(record.get("data"), dict)
            and canonical_json(record) == body
        )
    except (ValueError, CanonicalizationError):
        return False


class _Walk:
    """The loop of :func:`verify`: numbering, links, hash, columns, tree, heads.

    Each batch is checked as a whole with list operations (a comprehension of SHA-256
    digests, tuple comparisons for numbering, links and hashes), which costs a fraction
    of a per-event Python loop; only a batch that fails is walked event by event
    (:meth:`_first_break`) to name the first broken event precisely.
    """

    def __init__(self, heads: Sequence[TreeHead], strict: bool) -> None:
        self.heads = sorted(heads, key=lambda head: head.tree_size)
        self.strict = strict
        self.links = Links()
        self.tree = merkle.RootBuilder()
        self._due = 0

    def run(self, batches: Iterable[Batch]) -> VerifyReport:
        broken = self._heads_at(0)
        if broken is not None:
            return broken
        sha256, strict, links = hashlib.sha256, self.strict, self.links
        for batch in batches:
            seqs, prevs, digests, bodies, agrees = zip(*batch, strict=True)
            raws = [sha256(body).digest() for body in bodies]
            first = links.last_seq + 1
            if not (
                seqs == tuple(range(first, first + len(seqs)))
                and prevs[0] == links.last_hash
                and prevs[1:] == digests[:-1]
                and all(agrees)
                and b"".join(raws).hex() == "".join(digests)
                and (not strict or all(map(_is_canonical, bodies)))
            ):
                return self._first_break(batch)
            broken = self._grow(raws, first)
            if broken is not None:
                return broken
            links.checked = links.last_seq = seqs[-1]
            links.last_hash = digests[-1]
        if self._due < len(self.heads):
            detail = f"a signed tree head covers events up to {self.heads[-1].tree_size}"
            return links.broken(links.last_seq + 1, Break.TRUNCATED, detail)
        return links.ok(self.tree.root().hex(), len(self.heads))

    def _grow(self, raws: list[bytes], first: int) -> VerifyReport | None:
        """Add the digests of events ``first...`` to the tree, checking every head whose
        size falls among them."""
        done, last = 0, first + len(raws) - 1
        while self._due < len(self.heads) and self.heads[self._due].tree_size <= last:
            upto = self.heads[self._due].tree_size - first + 1
            self.tree.add(raws[done:upto])
            done = upto
            broken = self._heads_at(first + upto - 1)
            if broken is not None:
                return broken
        self.tree.add(raws[done:] if done else raws)
        return None

    def _heads_at(self, size: int) -> VerifyReport | None:
        """Check the heads of tree ``size`` (the tree holds exactly ``size`` leaves)."""
        root = None
        while self._due < len(self.heads) and self.heads[self._due].tree_size == size:
            head = self.heads[self._due]
            root = root or self.tree.root().hex()
            if head.root_hash != root:
                self.links.checked = self.links.last_seq = size
                return self.links.broken(
                    size,
                    Break.ROOT_MISMATCH,
                    f"the tree of {size} events has root {root[:16]}, but the tree head "
                    f"signed at {head.issued_at} says {head.root_hash[:16]}",
                )
            self._due += 1
        return None

    def _first_break(self, batch: Batch) -> VerifyReport:
        """Walk a batch that failed, event by event, to the first broken one."""
        links, sha256 = self.links, hashlib.sha256
        for seq, prev_hash, digest, body, agrees in batch:
            if seq != links.last_seq + 1 or prev_hash != links.last_hash:
                broken = links.step(seq, prev_hash, digest)
                if broken is not None:
                    return broken
            if sha256(body).hexdigest() != digest:
                return links.broken(seq, Break.HASH_MISMATCH, _NO_MATCH)
            if not agrees:
                return links.broken(seq, Break.HASH_MISMATCH, _COLUMNS_DISAGREE)
            if self.strict and not _is_canonical(body):
                return links.broken(seq, Break.NOT_CANONICAL, _NOT_RFC8785)
            broken = self._grow([sha256(body).digest()], seq)
            if broken is not None:
                return broken
            links.checked = links.last_seq = seq
            links.last_hash = digest
        raise AssertionError("a batch that failed its checks has no broken event")


_NO_MATCH = "the record does not match its hash"
_NOT_RFC8785 = "the stored record is not RFC 8785"


def _kept_heads(engine: Engine, keys: Mapping[str, Any] | None) -> list[TreeHead] | VerifyReport:
    """The tree heads kept in ``tree_heads``, each checked against its JWS (and with
    ``keys``, a JWK Set, its signature); a head that fails is the report."""
    heads = TreeHeadStore(engine).signed()
    for head in heads:
        try:
            if keys is not None and (key := key_for(head.jws, keys)) is not None:
                stated = verify_tree_head(head.jws, key)
            else:
                stated = read_unverified(head.jws)
        except LedgerError as exc:
            return _head_broken(head, str(exc))
        if (stated.tree_size, stated.root_hash) != (head.tree_size, head.root_hash):
            return _head_broken(head, "the stored columns differ from the signed head")
    return heads


def _head_broken(head: TreeHead, detail: str) -> VerifyReport:
    return VerifyReport(
        False, 0, 0, GENESIS_HASH, head.tree_size, Break.HEAD_INVALID,
        f"tree head signed at {head.issued_at}: {detail}",
    )  # fmt: skip


def verify(
    engine: Engine,
    *,
    head: str | None = None,
    public_key: Ed25519PublicKey | Mapping[str, Any] | None = None,
    strict: bool = False,
    keys: Mapping[str, Any] | None = None,
) -> VerifyReport:
    """Walk the whole ledger: chain, tree and kept tree heads; with a signed chain
    ``head`` (and its key) also catch truncation against it.

    ``keys`` (a JWK Set, the coordinator's published keys) also checks the signature of
    every kept tree head whose key is in it. ``strict`` re-runs the RFC 8785
    canonicaliser on every record (about three times slower); it catches a record
    rewritten in another JSON form and rehashed, which otherwise only shows as a broken
    link after it or against a signed head.
    """
    claims: dict[str, Any] | None = None
    if head is not None:
        if public_key is None:
            raise LedgerError("checking a signed head needs its public key", "head_invalid")
        try:
            claims = verify_head(head, public_key)
        except LedgerError as exc:
            return VerifyReport(False, 0, 0, GENESIS_HASH, None, Break.HEAD_INVALID, str(exc))
    heads = _kept_heads(engine, keys)
    if isinstance(heads, VerifyReport):
        return heads
    c = audit_events.c
    with engine.connect() as connection:
        batches = _batches(connection)
        with closing(batches):
            report = _Walk(heads, strict).run(batches)
        if report.detail == _COLUMNS_DISAGREE and report.seq is not None:
            return with_break(
                report, report.seq, Break.HASH_MISMATCH, _column_break(connection, report.seq)
            )
        if claims is None or not report.ok:
            return report
        at_head = connection.execute(select(c.hash).where(c.seq == claims["seq"])).scalar()
    return against_head(report, claims, at_head)


def against_head(
    report: VerifyReport, claims: Mapping[str, Any], at_head: str | None
) -> VerifyReport:
    seq = claims["seq"]
    if report.last_seq < seq:
        return with_break(
            report,
            report.last_seq + 1,
            Break.TRUNCATED,
            f"the signed head covers events up to {seq}",
        )
    if at_head != claims["hash"]:
        return with_break(report, seq, Break.HEAD_MISMATCH, "hash differs from the signed head")
    return report


def with_break(report: VerifyReport, seq: int, kind: Break, detail: str) -> VerifyReport:
    return VerifyReport(False, report.checked, report.last_seq, report.last_hash, seq, kind, detail)
