"""Merkle trees as RFC 9162 section 2 defines them: hashing, inclusion and consistency proofs.

With SHA-256 as the hash (the only one used here)::

    MTH({})       = SHA-256()                                   (the empty tree)
    MTH({d(0)})   = SHA-256(0x00 || d(0))                       (a leaf)
    MTH(D[n])     = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])) (k: largest power of 2 < n)

:class:`Tree` holds every node of a tree built from its leaf hashes, level by level (a
node without a right sibling is carried up unchanged, which yields exactly the RFC's
tree), and produces inclusion proofs (section 2.1.3.1) and consistency proofs (2.1.4.1).
:func:`root_from_inclusion` and :func:`verify_consistency` are the verification
algorithms of sections 2.1.3.2 and 2.1.4.2, step by step. :class:`RootBuilder` computes
the root of a growing tree in a single pass with ``O(log n)`` memory (what ``audit
verify`` uses while it walks the ledger).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

HASH_SIZE = 32
CHUNK = 4096  # leaves that :meth:`RootBuilder.add` hashes level by level at once
EMPTY_ROOT = hashlib.sha256(b"").digest()
_LEAF, _NODE = b"\x00", b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """``SHA-256(0x00 || data)``: the hash of one leaf."""
    return hashlib.sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 || left || right)``: the hash of an interior node."""
    return hashlib.sha256(_NODE + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


class Tree:
    """Every node of the tree over ``leaves`` (leaf hashes, in order)."""

    def __init__(self, leaves: Iterable[bytes]) -> None:
        levels = [list(leaves)]
        while len(levels[-1]) > 1:
            below = levels[-1]
            above = [node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
            if len(below) % 2:
                above.append(below[-1])
            levels.append(above)
        self._levels = levels

    @property
    def size(self) -> int:
        return len(self._levels[0])

    def root(self) -> bytes:
        return self._levels[-1][0] if self.size else EMPTY_ROOT

    def subtree(self, lo: int, hi: int) -> bytes:
        """``MTH(D[lo:hi])`` for the ranges the RFC's recursions visit."""
        n = hi - lo
        level = (n - 1).bit_length()
        if lo % (1 << level) == 0 and (n == 1 << level or hi == self.size):
            return self._levels[level][lo >> level]
        k = _split(n)
        return node_hash(self.subtree(lo, lo + k), self.subtree(lo + k, hi))

    def inclusion_proof(self, index: int) -> list[bytes]:
        """``PATH(index, D[n])``, from the leaf's sibling up to the root's child."""
        if not 0 <= index < self.size:
            raise ValueError(f"leaf {index} is not in a tree of {self.size}")
        proof = []
        for level in self._levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                proof.append(level[sibling])
            index >>= 1
        return proof

    def consistency_proof(self, old_size: int) -> list[bytes]:
        """``PROOF(old_size, D[n])``: that this tree extends the one of ``old_size`` leaves."""
        if not 0 <= old_size <= self.size:
            raise ValueError(f"a tree of {self.size} cannot extend one of {old_size}")
        if old_size in (0, self.size):
            return []
        return self._subproof(old_size, 0, self.size, True)

    def _subproof(self, m: int, lo: int, hi: int, whole: bool) -> list[bytes]:
        n = hi - lo
        if m == n:
            return [] if whole else [self.subtree(lo, hi)]
        k = _split(n)
        if m <= k:
            return [*self._subproof(m, lo, lo + k, whole), self.subtree(lo + k, hi)]
        return [*self._subproof(m - k, lo + k, hi, False), self.subtree(lo, lo + k)]


class RootBuilder:
    """The root of a tree whose leaves arrive one at a time (a compact range)."""

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[bytes] = []

    def push(self, leaf: bytes) -> None:
        """Add the next leaf hash."""
        stack, size, node = self._stack, self.size, leaf
        while size & 1:
            node = node_hash(stack.pop(), node)
            size >>= 1
        stack.append(node)
        self.size += 1

    def root(self) -> bytes:
        return fold(self._stack)

    def add(self, data: Sequence[bytes]) -> None:
        """Add one leaf per item of ``data`` (leaf *inputs*, hashed here).

        Each whole aligned chunk of :data:`CHUNK` leaves is hashed level by level with
        list comprehensions and pushed as one node, which is much faster than pushing
        its leaves one at a time; leaves before and after are pushed one by one.
        """
        start, end = 0, len(data)
        while start < end and self.size % CHUNK:
            self.push(leaf_hash(data[start]))
            start += 1
        while end - start >= CHUNK:
            self._push_node(_chunk_root(data[start : start + CHUNK]), CHUNK)
            start += CHUNK
        for item in data[start:end]:
            self.push(leaf_hash(item))

    def _push_node(self, node: bytes, width: int) -> None:
        """Push the root of a perfect subtree of ``width`` leaves (``size % width == 0``)."""
        stack, size = self._stack, self.size // width
        while size & 1:
            node = node_hash(stack.pop(), node)
            size >>= 1
        stack.append(node)
        self.size += width


def _chunk_root(data: Sequence[bytes]) -> bytes:
    """The root of the perfect tree over ``data`` (a power-of-two number of leaf inputs)."""
    sha256 = hashlib.sha256
    level = [sha256(_LEAF + item).digest() for item in data]
    while len(level) > 1:
        level = [
            sha256(_NODE + a + b).digest() for a, b in zip(level[::2], level[1::2], strict=True)
        ]
    return level[0]


def fold(stack: Sequence[bytes]) -> bytes:
    """The root from the perfect subtrees of a compact range, largest (leftmost) first."""
    if not stack:
        return EMPTY_ROOT
    root = stack[-1]
    for node in reversed(stack[:-1]):
        root = node_hash(node, root)
    return root


def _well_formed(*hashes: bytes) -> bool:
    return all(isinstance(h, bytes) and len(h) == HASH_SIZE for h in hashes)


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes | None:
    """The root that ``proof`` yields for ``leaf`` at ``index`` (RFC 9162 2.1.3.2), or None."""
    if not 0 <= index < size or not _well_formed(leaf, *proof):
        return None
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return node if sn == 0 else None


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> bool:
    """True when ``proof`` shows ``leaf`` at ``index`` in the tree of ``size`` with ``root``."""
    return root_from_inclusion(index, size, leaf, proof) == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True when ``proof`` shows the tree ``(new_size, new_root)`` extends ``(old_size,
    old_root)`` (RFC 9162 2.1.4.2; equal sizes need equal roots and an empty proof, and
    the empty tree is extended by every tree)."""
    if not 0 <= old_size <= new_size or not _well_formed(old_root, new_root, *proof):
        return False
    if old_size == new_size:
        return old_root == new_root and not proof
    if old_size == 0:
        return old_root == EMPTY_ROOT and not proof
    if not proof:
        return False
    if old_size & (old_size - 1) == 0:
        proof = [old_root, *proof]
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    first = second = proof[0]
    for node in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first, second = node_hash(node, first), node_hash(node, second)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            second = node_hash(second, node)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and first == old_root and second == new_root
