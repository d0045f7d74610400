"""An outside verifier, written from docs/audit-bundle.md alone (tests/outside_verifier.py),
agrees with ours on genuine, tampered and insider-forged bundles.

Every bundle test_bundle_anchors.py builds, and seeded random edits and insider lies, is
checked by ``verify_proof_bundle`` (what ``federation audit verify --bundle`` runs), by
docs/verifier/verify_bundle.py and by the outside verifier: the same verdict and the same
reason code from all three, and the same ``seq`` from the two stand-alone ones. Where
they disagreed, the document decided (see the report of issue 27).
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.keys import SigningKey
from agent_cards.transparency.receipts import issue_receipt
from contracts import strict_json
from coordinator.audit.anchors import Anchors
from coordinator.audit.log.signing import public_jwk
from coordinator.audit.proof_check import verify_proof_bundle
from tests import outside_verifier as outside
from tests.coordinator import test_bundle_anchors as built
from tests.coordinator.test_audit_cli import forged_end_to_end

COORDINATOR_KEYS = {"keys": [public_jwk(built.COORDINATOR)]}
# The reader holds two agents' keys: the remote's and a second agent's, which may collude.
REMOTE_KEYS = {"keys": [key.verification_key().to_jwk() for key in (built.REMOTE, built.COLLUDER)]}
STANDALONE = built._standalone_module()
THEIR_ANCHORS = STANDALONE.Anchors(
    {public_jwk(built.COORDINATOR)["kid"]: public_jwk(built.COORDINATOR)}, built.their_remotes()
)
OUR_ANCHORS = Anchors.of([COORDINATOR_KEYS], [REMOTE_KEYS])
MODES = ("anchored", "unanchored", "no key")

Answer = tuple[str | None, int | None]


def three(bundle: Any, mode: str) -> tuple[str | None, Answer, Answer]:
    """(our reason, the stand-alone verifier's (reason, seq), the outside one's)."""
    if mode == "anchored":
        ours = verify_proof_bundle(bundle, OUR_ANCHORS)
        theirs = STANDALONE.verify(bundle, THEIR_ANCHORS)
        other = outside.verify_detailed(bundle, COORDINATOR_KEYS, REMOTE_KEYS)
    else:
        unanchored = mode == "unanchored"
        ours = verify_proof_bundle(bundle, unanchored=unanchored)
        theirs = STANDALONE.verify(bundle, None, unanchored)
        other = outside.verify_detailed(bundle, unanchored=unanchored)
    if other.reason is None:
        assert other.verdict == ("verified" if mode == "anchored" else "unanchored")
    our_reason = None if ours.ok else str(ours.kind)
    return our_reason, (theirs["reason"], theirs.get("seq", 0)), (other.reason, other.seq)


def agree(bundle: Any, mode: str = "anchored") -> str | None:
    """Assert all three verifiers agree; return the common reason (None: verified)."""
    ours, theirs, other = three(bundle, mode)
    assert ours == theirs[0] == other[0], (mode, ours, theirs, other)
    assert theirs[0] is None or theirs[1] == other[1], (mode, theirs, other)
    return ours


# --- genuine and tampered ---------------------------------------------------------------


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return built.genuine_bundle(tmp_path_factory.mktemp("outside") / "l.db")


def test_a_genuine_bundle_verifies_alike(genuine: dict[str, Any]) -> None:
    assert [agree(genuine, mode) for mode in MODES] == [None, None, "no_anchor"]
    assert outside.verify(genuine, COORDINATOR_KEYS, REMOTE_KEYS) == ("verified", None)
    assert outside.verify(genuine, unanchored=True) == ("unanchored", None)
    text_form = json.dumps(genuine)
    assert outside.verify(text_form, [json.dumps(COORDINATOR_KEYS)], REMOTE_KEYS)[0] == "verified"


@pytest.fixture(scope="module")
def carried(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same facts as ``genuine``, the receipt riding on its verdict (format 4)."""
    return built.genuine_bundle(tmp_path_factory.mktemp("outside") / "c.db", carried=True)


def test_a_receipt_on_its_verdict_verifies_alike(
    genuine: dict[str, Any], carried: dict[str, Any]
) -> None:
    """The receipt in the verdict's event and the grant in the dispatch's: every verifier
    checks them there (the bundle's receipt and artifacts entries name the verdict, its
    token entry the dispatch), with two events fewer than the older form, which still
    verifies under its own format's label."""
    dispatch, verdict = carried["events"][0], carried["events"][-2]
    assert json.loads(dispatch["canonical"])["event_type"] == "message.dispatched"
    assert json.loads(verdict["canonical"])["event_type"] == "artifact.admitted"
    assert [t["seq"] for t in carried["tokens"]] == [dispatch["seq"]]
    assert [r["seq"] for r in carried["receipts"]] == [verdict["seq"]]
    assert [a["seq"] for a in carried["artifacts"]] == [verdict["seq"]]
    assert len(carried["events"]) == len(genuine["events"]) - 2
    assert [agree(carried, mode) for mode in MODES] == [None, None, "no_anchor"]
    older = {**genuine, "format": "a2a-federation.audit-proof/3"}
    assert [agree(older, mode) for mode in MODES] == [None, None, "no_anchor"]


def test_a_carried_receipt_is_bound_to_its_own_verdict(
    carried: dict[str, Any], tmp_path: Path
) -> None:
    """An insider who rewrites the verdict's content hash is caught by all three; one who
    moves the receipt off the verdict onto an event no verifier reads receipts from has a
    ledger with no receipt (as one who deletes it: a bundle proves what was recorded), and
    a bundle still listing it there is refused."""
    records = [json.loads(entry["canonical"]) for entry in carried["events"]]
    verdict = next(r for r in records if r["event_type"] == "artifact.admitted")
    verdict["data"]["content_hash"] = "sha256:" + "00" * 32
    rehashed = built.relogged(records, built.claims(), tmp_path / "hash.db")
    assert agree(rehashed) == "artifact_mismatch"

    records = [json.loads(entry["canonical"]) for entry in carried["events"]]
    verdict = next(r for r in records if r["event_type"] == "artifact.admitted")
    observed = next(r for r in records if r["event_type"] == "remote.state_observed")
    observed["data"] |= {name: verdict["data"].pop(name) for name in ("receipt", "kid")}
    moved = built.relogged(records, built.claims(), tmp_path / "moved.db")
    assert moved["receipts"] == [] and agree(moved) is None  # a ledger without the receipt
    listed = {**moved, "receipts": carried["receipts"], "artifacts": carried["artifacts"]}
    assert agree(listed) == "receipt_invalid"  # its entry names an event keeping none


@pytest.mark.parametrize(
    ("name", "lie", "reason"),
    [
        ("jti", "jti-other", "receipt_mismatch"),  # the receipt names no token minted
        ("aud", "urn:someone-else", "receipt_mismatch"),
        ("req_digest", None, "receipt_mismatch"),
    ],
)
def test_a_carried_grant_binds_the_receipt_as_a_grant_event_did(
    carried: dict[str, Any], tmp_path: Path, name: str, lie: Any, reason: str
) -> None:
    """The grant a dispatch carries is the one the receipt is bound to: an insider who
    rewrites it there, and re-signs the ledger, is refused by all three verifiers."""
    records = [json.loads(entry["canonical"]) for entry in carried["events"]]
    dispatch = next(r for r in records if r["event_type"] == "message.dispatched")
    dispatch["data"]["grant"][name] = lie
    assert agree(built.relogged(records, built.claims(), tmp_path / "g.db")) == reason


TAMPERS: dict[str, Callable[[dict[str, Any]], None]] = {
    **{f"list: {name}": tamper for name, (tamper, _) in built.TAMPERING.items()},
    **{f"edit: {name}": tamper for name, (tamper, _, _) in built.EDITS.items()},
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_every_tampered_variant_fails_alike(
    case: str, genuine: dict[str, Any], carried: dict[str, Any]
) -> None:
    for bundle in (genuine, carried):
        forged = copy.deepcopy(bundle)
        TAMPERS[case](forged)
        for mode in MODES:
            agree(forged, mode)


# --- insiders, each with its own key ----------------------------------------------------


def _rewritten_with_a_new_key(path: Path) -> dict[str, Any]:
    receipt = issue_receipt(built.claims(), built.REMOTE)
    ledger = built.write_ledger(path, {"disposition": {"status": "approved"}}, [receipt])
    return built.prove(ledger, Ed25519PrivateKey.generate(), artifacts=[built.CONTENT])


def _kept(path: Path, receipt: str) -> dict[str, Any]:
    return built.prove(built.write_ledger(path, {}, [receipt]), artifacts=[built.CONTENT])


def _fresh_key_under_the_real_kid(path: Path) -> dict[str, Any]:
    fresh = SigningKey.generate("ES256")
    receipt = jwt.api_jws.encode(
        strict_json.dumps(built.claims()),
        fresh.private_key,
        algorithm="ES256",
        headers={"kid": built.REMOTE.kid, "typ": "a2a-receipt+jwt"},
    )
    forged = _kept(path, receipt)
    forged["jwks"]["keys"][1] = {**fresh.verification_key().to_jwk(), "kid": built.REMOTE.kid}
    return forged


def _key_not_given(path: Path) -> dict[str, Any]:
    fresh = SigningKey.generate("EdDSA")
    forged = built.genuine_bundle(path, signer=fresh)
    forged["jwks"]["keys"].append(fresh.verification_key().to_jwk())
    return forged


def _bad_receipt_left_out(path: Path) -> dict[str, Any]:
    header, payload, signature = issue_receipt(built.claims(), built.REMOTE).split(".")
    forged = _kept(path, f"{header}.{payload}.{signature[:-4]}AAAA")
    forged["receipts"], forged["artifacts"] = [], []
    return forged


def _another_audience(path: Path) -> dict[str, Any]:
    return _kept(
        path, issue_receipt(built.claims(iss="https://elsewhere.example/a2a"), built.REMOTE)
    )


def _end_to_end(path: Path) -> dict[str, Any]:
    return forged_end_to_end(built.genuine_bundle(path), path.with_suffix(".forged.db"))


INSIDERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "coordinator: ledger rewritten, signed with a new key": _rewritten_with_a_new_key,
    "coordinator: rewritten end to end (audit cli)": _end_to_end,
    "coordinator: an event not in RFC 8785 form": built.not_rfc_8785_bundle,
    "coordinator and a second agent: the receipt re-signed in the remote's name": (
        built.colluding_forgery
    ),
    "remote: a fresh key under the real kid": _fresh_key_under_the_real_kid,
    "remote: a key the reader did not give": _key_not_given,
    "remote: a bad receipt left out of the list": _bad_receipt_left_out,
    "remote: another audience": _another_audience,
    **{
        f"coordinator: records another {name}": (
            lambda path, says=says: built.genuine_bundle(path, **says)
        )
        for name, (says, _) in built.FORGED_LEDGERS.items()
    },
    **{
        f"remote: states {name}": (lambda path, make=make: _kept(path, make()))
        for name, (make, _) in built.RECEIPT_LIES.items()
    },
    **{f"succession: {name}": forge for name, (forge, _) in built.SUCCESSION_FORGERIES.items()},
}


@pytest.mark.parametrize("case", sorted(INSIDERS))
def test_every_insider_forged_variant_fails_alike(case: str, tmp_path: Path) -> None:
    forged = INSIDERS[case](tmp_path / "l.db")
    assert agree(forged) is not None
    for mode in MODES[1:]:
        agree(forged, mode)


# --- key successions: a reader holding only the old key ---------------------------------


def agree_holding_the_old_key(bundle: Any) -> str | None:
    """All three verifiers, for a reader holding the coordinator's key and only the
    remote's old key, reach the same reason (None: verified) and seq."""
    jwk = built.REMOTE.verification_key().to_jwk()
    ours = verify_proof_bundle(bundle, Anchors.of([COORDINATOR_KEYS], [{"keys": [jwk]}]))
    only = STANDALONE.Anchors(THEIR_ANCHORS.coordinator, {built.REMOTE.kid: jwk})
    theirs = STANDALONE.verify(bundle, only)
    other = outside.verify_detailed(bundle, COORDINATOR_KEYS, {"keys": [jwk]})
    our_reason = None if ours.ok else str(ours.kind)
    assert our_reason == theirs["reason"] == other.reason, (ours, theirs, other)
    assert theirs["reason"] is None or theirs["seq"] == other.seq
    return our_reason


@pytest.fixture(scope="module")
def rotated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A bundle whose receipt NEWER signed, two rotations after the remote's pinned key."""
    chain = (built.succession(built.REMOTE, built.NEW), built.succession(built.NEW, built.NEWER))
    path = tmp_path_factory.mktemp("rotated") / "l.db"
    return built.successor_bundle(path, built.NEWER, chain)


def test_a_successors_receipt_verifies_alike_for_a_reader_holding_only_the_old_key(
    rotated: dict[str, Any],
) -> None:
    """Two statements lead from the old key to the receipt's: all three follow them; the
    one left out, the chain breaks (untrusted_key); structure-only, the same."""
    assert agree_holding_the_old_key(rotated) is None
    assert [agree(rotated, mode) for mode in MODES] == [None, None, "no_anchor"]
    broken = {**rotated, "successions": rotated["successions"][1:]}
    assert agree_holding_the_old_key(broken) == "untrusted_key"
    assert agree(broken, "unanchored") == "untrusted_key"


def test_random_edits_of_a_rotated_bundle_are_judged_alike(rotated: dict[str, Any]) -> None:
    """Two hundred seeded random edits of a bundle that needs its successions (their
    headers, payloads and signatures among what is edited), judged alike by all three,
    holding only the old key and structure-only."""
    rng = random.Random(7638)
    reasons: set[str | None] = set()
    for _ in range(200):
        forged = copy.deepcopy(rotated)
        for _ in range(rng.choice([1, 1, 2])):
            _mutate_rotated(forged, rng)
        reasons.add(agree_holding_the_old_key(forged))
        agree(forged, "unanchored")
    assert {None, "untrusted_key", "malformed"} <= reasons


def _mutate_rotated(bundle: dict[str, Any], rng: random.Random) -> None:
    """Half the time an edit of a statement (one character of it, or a part of it
    swapped with another statement's), else any random edit."""
    statements = bundle.get("successions")
    if not (isinstance(statements, list) and statements and rng.random() < 0.5):
        built._mutate(bundle, rng)
        return
    at = rng.randrange(len(statements))
    parts = str(statements[at]).split(".")
    if rng.random() < 0.5 and len(parts) == 3:
        other = str(rng.choice(statements)).split(".")
        index = rng.randrange(3)
        parts[index] = other[index] if len(other) == 3 else parts[index]
        statements[at] = ".".join(parts)
    else:
        built._mutate({"x": statements}, rng)


# --- seeded random edits and lies -------------------------------------------------------


def test_random_edits_are_judged_alike(genuine: dict[str, Any]) -> None:
    """Three hundred seeded random edits of a genuine bundle, each checked against the
    reader's keys and structure-only by all three verifiers."""
    rng = random.Random(2727)
    reasons: set[str | None] = set()
    for _ in range(300):
        forged = copy.deepcopy(genuine)
        for _ in range(rng.choice([1, 1, 2])):
            built._mutate(forged, rng)
        reasons.add(agree(forged))
        agree(forged, "unanchored")
    assert len(reasons) >= 6


def test_random_insider_lies_are_judged_alike(genuine: dict[str, Any], tmp_path: Path) -> None:
    """Thirty seeded lies, each signed by the party telling it: the remote re-signs its
    receipt, or the coordinator re-signs a head over its rewritten ledger."""
    rng = random.Random(2728)
    reasons: set[str | None] = set()
    for index in range(30):
        records = [json.loads(entry["canonical"]) for entry in genuine["events"]]
        stated = built.claims()
        built._insider_edit(records, stated, rng)
        reasons.add(agree(built.relogged(records, stated, tmp_path / f"{index}.db")))
    assert {"receipt_mismatch", None} <= reasons


# --- the reader's key files -------------------------------------------------------------

OKP = public_jwk(built.COORDINATOR)
EC = built.REMOTE.verification_key().to_jwk()


def _x_bits_set(value: str) -> str:
    """The same bytes in a non-canonical base64url (a padding bit set)."""
    return (
        value[:-1]
        + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".index(value[-1])
                | 1
            )
        ]
    )


KEY_FILES: dict[str, Any] = {
    "one JWK": OKP,
    "a JWK Set": {"keys": [OKP, EC]},
    "a JWK without kid": {name: OKP[name] for name in ("kty", "crv", "x")},
    "an empty JWK Set": {"keys": []},
    "keys not an array": {"keys": OKP},
    "a set with a kty member too": {"keys": [OKP], "kty": "OKP"},
    "key_ops null": {**OKP, "key_ops": None},
    "key_ops without verify": {**OKP, "key_ops": ["sign"]},
    "key_ops a string": {**OKP, "key_ops": "verify"},
    "key_ops with verify": {**OKP, "key_ops": ["verify"]},
    "use null": {**OKP, "use": None},
    "use enc": {**OKP, "use": "enc"},
    "alg of the other kty": {**OKP, "alg": "ES256"},
    "alg null": {**EC, "alg": None},
    "kid not the thumbprint": {**OKP, "kid": EC["kid"]},
    "kid null": {**OKP, "kid": None},
    "x padded": {**OKP, "x": OKP["x"] + "="},
    "x not canonical": {**OKP, "x": _x_bits_set(OKP["x"])},
    "x 31 bytes": {"kty": "OKP", "crv": "Ed25519", "x": "A" * 41 + "Q"},
    "x a number": {"kty": "OKP", "crv": "Ed25519", "x": 1},
    "EC without y": {name: EC[name] for name in ("kty", "crv", "x")},
    "EC point off the curve": {"kty": "EC", "crv": "P-256", "x": EC["x"], "y": EC["x"]},
    "a private member": {**OKP, "d": "A" * 43},
    "a symmetric key": {"kty": "oct", "k": "A" * 43},
    "another curve": {**OKP, "crv": "X25519"},
    "the same key twice": {"keys": [OKP, {**OKP, "use": "sig"}]},
    "not an object": [OKP],
}


def _accepts(check: Callable[[], Any]) -> bool:
    try:
        check()
    except Exception:  # each refuses in its own type: a usage error, no verdict
        return False
    return True


@pytest.mark.parametrize("case", sorted(KEY_FILES))
def test_every_key_file_is_judged_alike(case: str, genuine: dict[str, Any]) -> None:
    """A key file the reader passes is accepted or refused alike by all three; the same
    key carried in the bundle's jwks gives the same structure-only verdict."""
    document = KEY_FILES[case]
    answers = {
        _accepts(lambda: Anchors.of([document], [])),
        _accepts(lambda: STANDALONE.key_set(document)),
        _accepts(lambda: outside.reader_anchors([document])),
    }
    assert len(answers) == 1, case
    carried = copy.deepcopy(genuine)
    if isinstance(document, dict):
        carried["jwks"] = document if "keys" in document else {"keys": [document, EC]}
    agree(carried, "unanchored")


# --- insiders with their own tooling: what our `audit prove` would never write ---------


def _mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return outside.node(_mth(leaves[:k]), _mth(leaves[k:]))


def _path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.3.1 PATH(index, leaves)."""
    if len(leaves) <= 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < k:
        return [*_path(index, leaves[:k]), _mth(leaves[k:])]
    return [*_path(index - k, leaves[k:]), _mth(leaves[:k])]


def _b64(value: Any) -> str:
    return outside.b64url(value if isinstance(value, bytes) else json.dumps(value).encode())


def _resigned(bundle: dict[str, Any], header: dict[str, Any] | None = None) -> dict[str, Any]:
    """The coordinator's operator, with its real key, re-hashes the events as they now
    read, proves them in a tree of its own (other leaves made up) and signs its head."""
    leaves = [hashlib.sha256(bytes([n])).digest() for n in range(bundle["events"][-1]["seq"])]
    for entry in bundle["events"]:
        digest = hashlib.sha256(entry["canonical"].encode("utf-8", "surrogatepass")).digest()
        entry["hash"], leaves[entry["seq"] - 1] = digest.hex(), b"\x00" + digest
    leaves = [hashlib.sha256(leaf).digest() if len(leaf) == 33 else leaf for leaf in leaves]
    for entry in bundle["events"]:
        entry["inclusion_proof"] = [p.hex() for p in _path(entry["seq"] - 1, leaves)]
    claims = {"iss": "coordinator", "tree_size": len(leaves), "root_hash": _mth(leaves).hex()}
    kid = public_jwk(built.COORDINATOR)["kid"]
    header = header or {"alg": "EdDSA", "kid": kid, "typ": "ledger-tree-head+jwt"}
    signing_input = f"{_b64(header)}.{_b64(claims | {'issued_at': '2025-05-01T12:00:00Z'})}"
    signature = built.COORDINATOR.sign(signing_input.encode())
    bundle["tree_head"] = f"{signing_input}.{_b64(signature)}"
    return bundle


def _first_record(edit: Callable[[str], str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def forge(bundle: dict[str, Any]) -> dict[str, Any]:
        bundle["events"][0]["canonical"] = edit(bundle["events"][0]["canonical"])
        return _resigned(bundle)

    return forge


def _datum(text_of_value: str) -> Callable[[str], str]:
    return lambda canonical: canonical.replace(
        '"data":{"index":1}', '"data":{"index":1,"z":' + text_of_value + "}", 1
    )


KID = public_jwk(built.COORDINATOR)["kid"]
RESIGNED: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "as it was": _resigned,
    "a byte order mark before the record": _first_record(lambda c: "\ufeff" + c),
    "nested 64 deep": _first_record(_datum("[" * 62 + "]" * 62)),
    "nested 65 deep": _first_record(_datum("[" * 63 + "]" * 63)),
    "nested 3000 deep": _first_record(_datum("[" * 3000 + "]" * 3000)),
    "a float 1.0": _first_record(_datum("1.0")),
    "an integer of 2^53": _first_record(_datum("9007199254740992")),
    "an escaped e-acute": _first_record(_datum('"\\u00e9"')),
    "an escaped lone surrogate": _first_record(_datum('"\\ud800"')),
    "Infinity": _first_record(_datum("Infinity")),
    "attempt true": _first_record(lambda c: c.replace('"attempt":1', '"attempt":true', 1)),
    "a head header member more": lambda b: _resigned(
        b, {"alg": "EdDSA", "crit": ["x"], "kid": KID, "typ": "ledger-tree-head+jwt"}
    ),
    "a head header without typ": lambda b: _resigned(b, {"alg": "EdDSA", "kid": KID}),
}


@pytest.mark.parametrize("case", sorted(RESIGNED))
def test_a_coordinator_signing_odd_records_is_judged_alike(
    case: str, genuine: dict[str, Any]
) -> None:
    forged = RESIGNED[case](copy.deepcopy(genuine))
    for mode in MODES[:2]:
        agree(forged, mode)


def _without(
    claims: tuple[str, ...], event_type: str, members: tuple[str, ...]
) -> Callable[[dict[str, Any], Path], dict[str, Any]]:
    def forge(genuine: dict[str, Any], path: Path) -> dict[str, Any]:
        records = [json.loads(entry["canonical"]) for entry in genuine["events"]]
        stated = {k: v for k, v in built.claims().items() if k not in claims}
        for record in records:
            if record["event_type"] == event_type:
                record["data"] = {k: v for k, v in record["data"].items() if k not in members}
        return built.relogged(records, stated, path)

    return forge


# Both parties leave a member out: an absent member equals nothing, not another absent one.
ABSENT: dict[str, tuple[Callable[[dict[str, Any], Path], dict[str, Any]], str]] = {
    "no state stated, none observed": (
        _without(("state",), "remote.state_observed", ("remote_state",)),
        "receipt_mismatch",
    ),
    "no req_digest stated, none bound": (
        _without(("req_digest",), "grant.minted", ("req_digest",)),
        "receipt_mismatch",
    ),
    # no iss is not the signing key's identity: caught before the binding steps
    "no iss stated, no aud minted": (
        _without(("iss",), "grant.minted", ("aud",)),
        "receipt_issuer_mismatch",
    ),
    "no jti minted": (_without((), "grant.minted", ("jti",)), "token_mismatch"),
    "no handoff_id stated": (_without(("handoff_id",), "", ()), "receipt_mismatch"),
}


@pytest.mark.parametrize("case", sorted(ABSENT))
def test_a_member_both_parties_leave_out_binds_nothing(
    case: str, genuine: dict[str, Any], tmp_path: Path
) -> None:
    forge, reason = ABSENT[case]
    assert agree(forge(genuine, tmp_path / "l.db")) == reason


def _both_state(
    claim: str, stated: Any, event_type: str, member: str, recorded: Any
) -> Callable[[dict[str, Any], Path], dict[str, Any]]:
    def forge(genuine: dict[str, Any], path: Path) -> dict[str, Any]:
        records = [json.loads(entry["canonical"]) for entry in genuine["events"]]
        for record in records:
            if record["event_type"] == event_type:
                record["data"][member] = recorded
        return built.relogged(records, {**built.claims(), claim: stated}, path)

    return forge


# Both parties lie with values that Python finds equal and JSON does not: true is not 1.
UNEQUAL_AS_JSON: dict[str, Callable[[dict[str, Any], Path], dict[str, Any]]] = {
    "req_digest true, bound 1": _both_state("req_digest", True, "grant.minted", "req_digest", 1),
    "req_digest 1, bound true": _both_state("req_digest", 1, "grant.minted", "req_digest", True),
    "state false, observed 0": _both_state(
        "state", False, "remote.state_observed", "remote_state", 0
    ),
}


@pytest.mark.parametrize("case", sorted(UNEQUAL_AS_JSON))
def test_values_equal_in_python_but_not_in_json_bind_nothing(
    case: str, genuine: dict[str, Any], tmp_path: Path
) -> None:
    assert agree(UNEQUAL_AS_JSON[case](genuine, tmp_path / "l.db")) == "receipt_mismatch"
