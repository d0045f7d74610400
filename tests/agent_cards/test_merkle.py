"""RFC 9162 section 2 hashing, inclusion and consistency proofs, against published vectors.

The vectors are the RFC 6962 test data of Google's Trillian (Apache 2.0): leaf inputs, node
and root hashes from ``merkle/testonly/constants.go``, proofs from
``merkle/logverifier/log_verifier_test.go``. Only their values are copied here. RFC 9162
keeps RFC 6962's hashing, so the same vectors apply.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_cards.transparency.merkle import (
    CHUNK,
    EMPTY_ROOT,
    RootBuilder,
    Tree,
    leaf_hash,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)

LEAF_INPUTS = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
LEAF_HASHES = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
]
# Root of the tree over the first n leaf inputs, n = 0..8.
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# (leaf index, tree size, proof)
INCLUSION = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
# (old size, new size, proof)
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]


def unhex(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(value) for value in values]


def tree_of(size: int) -> Tree:
    return Tree(leaf_hash(data) for data in LEAF_INPUTS[:size])


def test_leaf_hashes_match_the_vectors() -> None:
    """Leaf hashing is SHA-256 over 0x00 and the input, for every published leaf."""
    assert [leaf_hash(data).hex() for data in LEAF_INPUTS] == LEAF_HASHES


def test_roots_match_the_vectors_for_every_size() -> None:
    """The tree and the one-pass builder give the published root for sizes 0 to 8."""
    builder = RootBuilder()
    assert builder.root().hex() == ROOTS[0] == EMPTY_ROOT.hex()
    for size in range(1, 9):
        builder.push(leaf_hash(LEAF_INPUTS[size - 1]))
        assert tree_of(size).root().hex() == ROOTS[size]
        assert builder.root().hex() == ROOTS[size]


def test_inclusion_proofs_match_the_vectors() -> None:
    """Our inclusion proofs are the published ones, and they verify."""
    for index, size, expected in INCLUSION:
        proof = tree_of(size).inclusion_proof(index)
        assert [node.hex() for node in proof] == expected, (index, size)
        leaf = leaf_hash(LEAF_INPUTS[index])
        assert verify_inclusion(index, size, leaf, unhex(expected), bytes.fromhex(ROOTS[size]))


def test_consistency_proofs_match_the_vectors() -> None:
    """Our consistency proofs are the published ones, and they verify."""
    for old, new, expected in CONSISTENCY:
        proof = tree_of(new).consistency_proof(old)
        assert [node.hex() for node in proof] == expected, (old, new)
        roots = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new])
        assert verify_consistency(old, new, *roots, unhex(expected))


def test_corrupted_vector_proofs_fail() -> None:
    """Wrong index, size, root, an extra, missing or flipped node: each is refused."""
    index, size, expected = INCLUSION[2]
    leaf, root, proof = leaf_hash(LEAF_INPUTS[index]), bytes.fromhex(ROOTS[size]), unhex(expected)
    assert not verify_inclusion(index + 1, size, leaf, proof, root)
    assert not verify_inclusion(index, size * 2, leaf, proof, root)
    assert not verify_inclusion(index, size, leaf, proof, EMPTY_ROOT)
    assert not verify_inclusion(index, size, leaf, [*proof, root], root)
    assert not verify_inclusion(index, size, leaf, proof[:-1], root)
    assert not verify_inclusion(index, size, leaf, [b"", *proof], root)
    old, new, expected = CONSISTENCY[2]
    old_root, new_root = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new])
    nodes = unhex(expected)
    assert not verify_consistency(old, new, new_root, old_root, nodes)
    assert not verify_consistency(old + 1, new, old_root, new_root, nodes)
    assert not verify_consistency(old, new, old_root, new_root, [])
    assert not verify_consistency(old, new, old_root, new_root, [*nodes, new_root])
    assert not verify_consistency(old, new, old_root, new_root, nodes[:-1])
    assert not verify_consistency(1, 1, old_root, new_root, [])
    assert not verify_consistency(2, 1, old_root, new_root, [])


def test_edge_cases_of_consistency() -> None:
    """The empty tree is extended by any tree; equal sizes need equal roots and no proof."""
    root = bytes.fromhex(ROOTS[3])
    assert verify_consistency(0, 3, EMPTY_ROOT, root, [])
    assert not verify_consistency(0, 3, root, root, [])
    assert verify_consistency(3, 3, root, root, [])
    assert not verify_consistency(3, 3, root, root, [root])


# --- properties -----------------------------------------------------------------------

leaves = st.lists(st.binary(max_size=8), min_size=1, max_size=80)


def _flip(node: bytes, bit: int) -> bytes:
    return bytes([node[0] ^ (1 << (bit % 8)), *node[1:]])


@given(leaves, st.data())
def test_every_inclusion_proof_verifies_and_a_tampered_node_fails(
    inputs: list[bytes], data: st.DataObject
) -> None:
    """For a random tree and leaf, the proof verifies; flipping a bit of any node breaks it."""
    tree = Tree(leaf_hash(item) for item in inputs)
    index = data.draw(st.integers(0, tree.size - 1))
    proof = tree.inclusion_proof(index)
    leaf = leaf_hash(inputs[index])
    assert root_from_inclusion(index, tree.size, leaf, proof) == tree.root()
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        tampered = [*proof[:at], _flip(proof[at], data.draw(st.integers(0, 7))), *proof[at + 1 :]]
        assert not verify_inclusion(index, tree.size, leaf, tampered, tree.root())


@given(leaves, st.data())
def test_every_consistency_proof_verifies_and_a_tampered_node_fails(
    inputs: list[bytes], data: st.DataObject
) -> None:
    """For random sizes m <= n the proof verifies; flipping a bit of any node breaks it."""
    hashes = [leaf_hash(item) for item in inputs]
    new = Tree(hashes)
    old_size = data.draw(st.integers(0, new.size))
    old = Tree(hashes[:old_size])
    proof = new.consistency_proof(old_size)
    assert verify_consistency(old_size, new.size, old.root(), new.root(), proof)
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        tampered = [*proof[:at], _flip(proof[at], data.draw(st.integers(0, 7))), *proof[at + 1 :]]
        assert not verify_consistency(old_size, new.size, old.root(), new.root(), tampered)


@given(leaves, st.data())
def test_a_forked_tree_is_not_consistent(inputs: list[bytes], data: st.DataObject) -> None:
    """A tree that changed one of the old leaves cannot prove it extends the old tree."""
    hashes = [leaf_hash(item) for item in inputs]
    old_size = data.draw(st.integers(1, len(hashes)))
    changed = data.draw(st.integers(0, old_size - 1))
    forked = [*hashes[:changed], leaf_hash(b"forged" + inputs[changed]), *hashes[changed + 1 :]]
    new = Tree(forked)
    old_root = Tree(hashes[:old_size]).root()
    proof = new.consistency_proof(old_size)
    assert not verify_consistency(old_size, new.size, old_root, new.root(), proof)


def test_chunked_builder_matches_the_tree_across_chunk_boundaries() -> None:
    """Adding leaves in uneven slices (whole 4096-leaf chunks hashed at once, the rest one
    by one) gives the same root as the full tree at every size where it is read."""
    inputs = [index.to_bytes(4, "big") for index in range(3 * CHUNK + 123)]
    tree_roots = {}
    for size in (1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7, len(inputs)):
        tree_roots[size] = Tree(leaf_hash(item) for item in inputs[:size]).root()
    builder, done = RootBuilder(), 0
    for size in sorted(tree_roots):
        builder.add(inputs[done:size])
        done = size
        assert builder.size == size and builder.root() == tree_roots[size], size
