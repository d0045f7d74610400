"""Proof bundles checked against the reader's keys, by both verifiers, on genuine,
tampered and insider-forged bundles.

An insider holds its OWN private key and lies with it: the coordinator's operator
rewrites its ledger and signs a head over it (with a new key, or with its real one), a
remote signs a receipt with a fresh key under its real kid. Each forged bundle is built
the way that party would build it, then checked by ``verify_proof_bundle`` and by the
stand-alone verifier (docs/verifier/verify_bundle.py, run as a subprocess as an auditor
would run it): both must reach the same verdict with the same reason code.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import itertools
import json
import random
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from agent_cards.transparency.receipts import artifact_digest, issue_receipt
from agent_cards.transparency.statements import sign_statement
from agent_cards.transparency.succession import SUCCESSION_TYP, sign_succession
from contracts import strict_json
from coordinator.audit.anchors import Anchors
from coordinator.audit.bundles import export_bundle
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import CORRELATION_FIELDS, AuditEvent
from coordinator.audit.log.signing import public_jwk
from coordinator.audit.proof_check import verify_document, verify_proof_bundle
from coordinator.audit.proofs import prove_run
from coordinator.audit.receipts import receipt_data, receipt_event, records_receipt
from coordinator.errors import LedgerError
from coordinator.storage.engine import open_engine
from coordinator.storage.migrations import migrate

AT = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verifier" / "verify_bundle.py"
REQ = "sha-256:" + "r" * 43
ARTIFACTS = [{"artifactId": "a-1", "name": "risk-finding", "parts": [{"text": "ok €"}]}]
CONTENT = strict_json.dumps(ARTIFACTS).decode()
COORDINATOR = Ed25519PrivateKey.generate()
REMOTE = SigningKey.generate("ES256")
# The identity the remote's tokens are minted for and its receipts name: its key's.
AUD = identity_of(REMOTE.verification_key())
# A second agent whose key the reader also holds: it can sign, but only as itself.
COLLUDER = SigningKey.generate("EdDSA")


def jwks_of(key: SigningKey) -> dict[str, Any]:
    return {"keys": [key.verification_key().to_jwk()]}


def reader_anchors(remotes: tuple[SigningKey, ...] = (REMOTE, COLLUDER)) -> Anchors:
    """What the auditor holds: the coordinator's key and (by default) two agents' keys."""
    return Anchors.of([{"keys": [public_jwk(COORDINATOR)]}], [jwks_of(key) for key in remotes])


def claims(**changes: Any) -> dict[str, Any]:
    values = {
        "iss": AUD,
        "task_id": "task-1",
        "handoff_id": "handoff-3",
        "attempt": 1,
        "jti": "jti-1",
        "req_digest": REQ,
        "artifact_digest": artifact_digest(ARTIFACTS),
        "state": "TASK_STATE_COMPLETED",
        "issued_at": "2025-05-01T12:00:00.000Z",
    }
    return values | changes


def event(run_id: str, event_type: str = "message.dispatched", **changes: Any) -> AuditEvent:
    values: dict[str, Any] = {
        "event_type": event_type,
        "actor": "coordinator",
        "run_id": run_id,
        "handoff_id": "handoff-3",
        "attempt": 1,
        "recorded_at": AT,
        "data": {"index": 0},
    }
    return AuditEvent(**(values | changes))


def write_ledger(
    path: Path, ledger_says: dict[str, Any], receipts: list[str], *, carried: bool = False
) -> Ledger:
    """Run-a's facts (interleaved with run-b's) as the coordinator records them:
    ``ledger_says`` overrides what the ledger records of the grant, the task and its
    state; each of ``receipts`` is kept as a ``handoff.receipt`` event and the grant as a
    ``grant.minted``, or, ``carried``, the one receipt rides on the verdict and the grant
    on the dispatch (as the coordinator records them since format 4)."""
    engine = open_engine(f"sqlite+pysqlite:///{path}")
    migrate(engine)
    ledger = Ledger(engine)
    grant = {"jti": ledger_says.get("jti", "jti-1"), "claims_digest": "sha-256:" + "ab" * 32}
    grant |= {"req_digest": ledger_says.get("req_digest", REQ), "scope": "risk"}
    grant["aud"] = ledger_says.get("aud", AUD)
    task = ledger_says.get("task_id", "task-1")
    state = {"remote_state": ledger_says.get("state", "TASK_STATE_COMPLETED")}
    received = "sha256:" + hashlib.sha256(CONTENT.encode()).hexdigest()
    facts = [
        event("run-a", data={"index": 1, "grant": grant}),
        event("run-a", "remote.state_observed", remote_task_id=task, data=state),
    ]
    if not carried:
        facts[:1] = [event("run-a", data={"index": 1}), event("run-a", "grant.minted", data=grant)]
    for receipt in [] if carried else receipts:
        facts.append(
            receipt_event(
                receipt, actor="coordinator", run_id="run-a", handoff_id="handoff-3",
                attempt=1, remote_task_id=task,
            )
        )  # fmt: skip
    artifact = {"content_hash": ledger_says.get("content_hash", received), "size": 1}
    if carried:
        (receipt,) = receipts
        artifact |= receipt_data(receipt)
    facts.append(event("run-a", "artifact.admitted", remote_task_id=task, data=artifact))
    facts.append(event("run-a", "run.disposition", data=ledger_says.get("disposition", {})))
    for index, fact in enumerate(facts):
        ledger.append(event("run-b", data={"index": index}))
        ledger.append(fact)
    return ledger


def prove(ledger: Ledger, key: Ed25519PrivateKey = COORDINATOR, **options: Any) -> dict[str, Any]:
    bundle = prove_run(ledger, "run-a", key, remote_keys=jwks_of(REMOTE)["keys"], now=AT, **options)
    result: dict[str, Any] = json.loads(json.dumps(bundle))
    return result


def genuine_bundle(
    path: Path, signer: SigningKey = REMOTE, *, carried: bool = False, **ledger_says: Any
) -> dict[str, Any]:
    disposition = {"status": "needs_review"}
    ledger_says.setdefault("disposition", disposition)
    receipt = issue_receipt(claims(), signer)
    ledger = write_ledger(path, ledger_says, [receipt], carried=carried)
    return prove(ledger, artifacts=[CONTENT])


def key_file(path: Path, document: dict[str, Any]) -> str:
    path.write_text(json.dumps(document))
    return str(path)


GENUINE_ANCHORS = "genuine"


def standalone(
    bundle: dict[str, Any],
    tmp_path: Path,
    anchors: str | None,
    remotes: tuple[SigningKey, ...] = (REMOTE, COLLUDER),
) -> dict[str, Any]:
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    args = [sys.executable, str(VERIFIER), str(path), "--json"]
    if anchors == GENUINE_ANCHORS:
        coordinator = key_file(tmp_path / "c.json", {"keys": [public_jwk(COORDINATOR)]})
        args += ["--coordinator-key", coordinator]
        for index, key in enumerate(remotes):
            args += ["--remote-key", key_file(tmp_path / f"r{index}.json", jwks_of(key))]
    elif anchors == "unanchored":
        args.append("--unanchored")
    completed = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode in (0, 1), completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    assert (completed.returncode == 0) == result["ok"]
    return result


def both(
    bundle: dict[str, Any],
    tmp_path: Path,
    anchors: str | None = GENUINE_ANCHORS,
    remotes: tuple[SigningKey, ...] = (REMOTE, COLLUDER),
) -> tuple[str | None, str | None]:
    """(our reason, the stand-alone verifier's); None when the bundle verifies. The
    reader holds the coordinator's key and the keys of ``remotes``."""
    if anchors == GENUINE_ANCHORS:
        ours = verify_proof_bundle(bundle, reader_anchors(remotes))
    else:
        ours = verify_proof_bundle(bundle, unanchored=anchors == "unanchored")
    theirs = standalone(bundle, tmp_path, anchors, remotes)
    if ours.ok:
        assert ours.anchored == theirs["anchored"] == (anchors == GENUINE_ANCHORS)
        assert ours.successions == theirs["successions"]
    return (None if ours.ok else str(ours.kind)), theirs["reason"]


# --- genuine ------------------------------------------------------------------------------


def test_a_genuine_bundle_verifies_against_the_readers_keys(tmp_path: Path) -> None:
    """Against the coordinator's and the remote's keys, both verifiers accept the bundle;
    it carries the exact artifacts the receipt covers."""
    bundle = genuine_bundle(tmp_path / "l.db")
    assert both(bundle, tmp_path) == (None, None)
    assert [e["seq"] for e in bundle["events"]] == [2, 4, 6, 8, 10, 12]
    assert "run-b" not in json.dumps(bundle["events"])
    assert [t["seq"] for t in bundle["tokens"]] == [4]
    assert [r["seq"] for r in bundle["receipts"]] == [8]
    assert bundle["artifacts"] == [{"seq": 8, "content": CONTENT}]
    assert [k["kid"] for k in bundle["jwks"]["keys"]] == [
        public_jwk(COORDINATOR)["kid"],
        REMOTE.kid,
    ]


def test_without_an_anchor_nothing_is_proven(tmp_path: Path) -> None:
    """No key: both refuse with no_anchor; asked for structure only, both say so."""
    bundle = genuine_bundle(tmp_path / "l.db")
    assert both(bundle, tmp_path, None) == ("no_anchor", "no_anchor")
    assert both(bundle, tmp_path, "unanchored") == (None, None)


# --- insiders, each holding its own private key -----------------------------------------


def test_a_ledger_rewritten_and_signed_with_a_new_key_is_refused(tmp_path: Path) -> None:
    """The coordinator's operator rewrites the run (disposition approved) and signs it
    end to end with a key of its own: consistent on its own keys, refused on ours."""
    receipt = issue_receipt(claims(), REMOTE)
    forged = prove(
        write_ledger(tmp_path / "f.db", {"disposition": {"status": "approved"}}, [receipt]),
        Ed25519PrivateKey.generate(),
        artifacts=[CONTENT],
    )
    assert both(forged, tmp_path, "unanchored") == (None, None)
    assert both(forged, tmp_path) == ("untrusted_key", "untrusted_key")


FORGED_LEDGERS: dict[str, tuple[dict[str, Any], str]] = {
    "the task id": ({"task_id": "task-9"}, "receipt_mismatch"),
    "the jti": ({"jti": "jti-9"}, "receipt_mismatch"),
    "the req_digest": ({"req_digest": "sha-256:" + "x" * 43}, "receipt_mismatch"),
    "the final state": ({"state": "TASK_STATE_FAILED"}, "receipt_mismatch"),
    "the artifacts received": ({"content_hash": "sha256:" + "0" * 64}, "artifact_mismatch"),
}


@pytest.mark.parametrize("case", sorted(FORGED_LEDGERS))
def test_a_ledger_that_contradicts_its_receipt_is_refused(case: str, tmp_path: Path) -> None:
    """The operator, with the coordinator's real key, records other facts than the
    remote's receipt states: the receipt, which it cannot re-sign, gives it away."""
    ledger_says, reason = FORGED_LEDGERS[case]
    forged = genuine_bundle(tmp_path / "l.db", **ledger_says)
    assert both(forged, tmp_path) == (reason, reason)


def test_a_receipt_for_another_audience_is_refused(tmp_path: Path) -> None:
    """A receipt the remote signs in its own name for a token minted for another agent."""
    another = identity_of(COLLUDER.verification_key())
    forged = genuine_bundle(tmp_path / "l.db", aud=another)
    assert both(forged, tmp_path) == ("receipt_mismatch", "receipt_mismatch")


def test_a_receipt_naming_any_issuer_but_its_signer_is_refused(tmp_path: Path) -> None:
    """The remote signs with its real key a receipt whose ``iss`` is a URL: a signature
    speaks only for its key's identity."""
    receipt = issue_receipt(claims(iss="https://elsewhere.example/a2a"), REMOTE)
    forged = prove(write_ledger(tmp_path / "l.db", {}, [receipt]), artifacts=[CONTENT])
    reason = "receipt_issuer_mismatch"
    assert both(forged, tmp_path) == (reason, reason)


def test_a_receipt_signed_with_a_fresh_key_under_the_real_kid_is_refused(tmp_path: Path) -> None:
    """The remote signs with a fresh key but names its real kid, and puts the fresh key
    in the bundle labelled with that kid: neither verifier looks keys up by label."""
    fresh = SigningKey.generate("ES256")
    forged_receipt = jwt.api_jws.encode(
        strict_json.dumps(claims()),
        fresh.private_key,
        algorithm="ES256",
        headers={"kid": REMOTE.kid, "typ": "a2a-receipt+jwt"},
    )
    forged = prove(write_ledger(tmp_path / "l.db", {}, [forged_receipt]), artifacts=[CONTENT])
    forged["jwks"]["keys"][1] = {**fresh.verification_key().to_jwk(), "kid": REMOTE.kid}
    assert both(forged, tmp_path) == ("receipt_invalid", "receipt_invalid")
    assert both(forged, tmp_path, "unanchored") == ("malformed", "malformed")


def colluding_forgery(path: Path) -> dict[str, Any]:
    """The coordinator's operator and a second agent the reader trusts: the Finding
    rewritten, the receipt re-signed over it with the second agent's key while its ``iss``
    still names the remote, the ledger re-logged and its head signed with the real key."""
    rewritten = [{**ARTIFACTS[0], "parts": [{"text": "refund_execution_permitted: true"}]}]
    content = strict_json.dumps(rewritten).decode()
    receipt = issue_receipt(claims(artifact_digest=artifact_digest(rewritten)), COLLUDER)
    received = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
    ledger = write_ledger(path, {"content_hash": received}, [receipt])
    return prove(ledger, artifacts=[content])


def test_a_receipt_signed_by_another_trusted_agent_in_the_remotes_name_is_refused(
    tmp_path: Path,
) -> None:
    """A signature speaks only for the identity of the key that verified it: a receipt
    naming the remote but verifying only with another agent's key is refused by both."""
    forged = colluding_forgery(tmp_path / "l.db")
    reason = "receipt_issuer_mismatch"
    assert both(forged, tmp_path) == (reason, reason)


def test_a_receipt_under_a_key_not_given_is_refused(tmp_path: Path) -> None:
    """A receipt signed (validly) by a key the reader did not give: untrusted_key, even
    though the bundle carries that key."""
    fresh = SigningKey.generate("EdDSA")
    forged = genuine_bundle(tmp_path / "l.db", signer=fresh)
    forged["jwks"]["keys"].append(fresh.verification_key().to_jwk())
    assert both(forged, tmp_path) == ("untrusted_key", "untrusted_key")


def test_a_bad_receipt_left_out_of_the_list_is_still_checked(tmp_path: Path) -> None:
    """Every receipt event is verified, whether or not the receipts list names it."""
    receipt = issue_receipt(claims(), REMOTE)
    header, payload, signature = receipt.split(".")
    broken = f"{header}.{payload}.{signature[:-4]}AAAA"
    forged = prove(write_ledger(tmp_path / "l.db", {}, [broken]), artifacts=[CONTENT])
    forged["receipts"] = []
    forged["artifacts"] = []
    assert both(forged, tmp_path) == ("receipt_invalid", "receipt_invalid")


def not_rfc_8785_bundle(path: Path) -> dict[str, Any]:
    """A bundle whose last event is stored in another JSON form of its record, rehashed."""
    ledger = write_ledger(path, {}, [issue_receipt(claims(), REMOTE)])
    seq, _ = ledger.head()
    with ledger.engine.begin() as connection:
        body = connection.execute(
            text("SELECT canonical FROM audit_events WHERE seq = :seq"), {"seq": seq}
        ).scalar_one()
        spaced = json.dumps(json.loads(body), sort_keys=True)
        connection.execute(
            text("UPDATE audit_events SET canonical = :body, hash = :hash WHERE seq = :seq"),
            {"body": spaced, "hash": hashlib.sha256(spaced.encode()).hexdigest(), "seq": seq},
        )
    return prove(ledger, artifacts=[CONTENT])


def test_an_event_not_in_rfc_8785_form_is_refused(tmp_path: Path) -> None:
    """The operator stores its last event in another JSON form of the same record and
    rehashes it (nothing follows it to break): the coordinator signs a head over it, but
    a bundle of it is refused."""
    forged = not_rfc_8785_bundle(tmp_path / "l.db")
    assert both(forged, tmp_path) == ("not_canonical", "not_canonical")


# --- tampered after the fact ------------------------------------------------------------

Tamper = Callable[[dict[str, Any]], None]


def _receipt_seq(bundle: dict[str, Any]) -> int:
    return int(bundle["receipts"][0]["seq"])


def _edit_content(bundle: dict[str, Any]) -> None:
    bundle["artifacts"][0]["content"] = CONTENT.replace("ok", "no")


def _respaced(bundle: dict[str, Any]) -> None:
    bundle["artifacts"][0]["content"] = json.dumps(ARTIFACTS)


TAMPERING: dict[str, tuple[Tamper, str]] = {
    "artifacts removed": (lambda b: b.update(artifacts=[]), "artifact_missing"),
    "artifacts edited": (_edit_content, "artifact_mismatch"),
    "artifacts re-spaced (same value, other bytes)": (_respaced, "artifact_mismatch"),
    "artifacts named for another event": (
        lambda b: b["artifacts"][0].update(seq=b["events"][0]["seq"]),
        "artifact_mismatch",
    ),
    "artifacts twice": (lambda b: b["artifacts"].append(b["artifacts"][0]), "artifact_mismatch"),
    "artifacts not text": (lambda b: b["artifacts"][0].update(content=ARTIFACTS), "malformed"),
    "no artifacts member": (lambda b: b.pop("artifacts"), "malformed"),
    "receipt list names another event": (
        lambda b: b["receipts"][0].update(seq=b["events"][0]["seq"]),
        "receipt_invalid",
    ),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampered_artifacts_and_lists_fail_alike_in_both_verifiers(
    case: str, tmp_path: Path
) -> None:
    tamper, reason = TAMPERING[case]
    forged = copy.deepcopy(genuine_bundle(tmp_path / "l.db"))
    tamper(forged)
    assert both(forged, tmp_path) == (reason, reason)


def _edit_record(bundle: dict[str, Any], rehash: bool) -> None:
    entry = bundle["events"][0]
    entry["canonical"] = entry["canonical"].replace('"index":1', '"index":10')
    if rehash:
        entry["hash"] = hashlib.sha256(entry["canonical"].encode()).hexdigest()


def _flip(value: str) -> str:
    return ("0" if value[0] != "0" else "1") + value[1:]


def _resign_head(bundle: dict[str, Any], signer: Ed25519PrivateKey) -> None:
    claims = jwt.decode(bundle["tree_head"], options={"verify_signature": False})
    kid = public_jwk(signer)["kid"]
    bundle["tree_head"] = jwt.encode(
        claims, signer, algorithm="EdDSA", headers={"typ": "ledger-tree-head+jwt", "kid": kid}
    )


OTHER = Ed25519PrivateKey.generate()


def _other_remote_jwk() -> dict[str, str]:
    return SigningKey.generate("ES256").verification_key().to_jwk()


# case: (tamper, reason against the reader's keys, reason of a structure-only check)
EDITS: dict[str, tuple[Tamper, str | None, str]] = {
    "event edited": (lambda b: _edit_record(b, rehash=False), "hash_mismatch", "hash_mismatch"),
    "event edited and rehashed": (
        lambda b: _edit_record(b, rehash=True),
        "inclusion_invalid",
        "inclusion_invalid",
    ),
    "event moved to another run": (
        lambda b: b["events"][1].update(
            canonical=b["events"][1]["canonical"].replace("run-a", "run-b")
        ),
        "hash_mismatch",
        "hash_mismatch",
    ),
    "proof node flipped": (
        lambda b: b["events"][0]["inclusion_proof"].__setitem__(
            1, _flip(b["events"][0]["inclusion_proof"][1])
        ),
        "inclusion_invalid",
        "inclusion_invalid",
    ),
    "proof node removed": (
        lambda b: b["events"][2]["inclusion_proof"].pop(),
        "inclusion_invalid",
        "inclusion_invalid",
    ),
    "tree head payload edited": (
        lambda b: b.update(
            tree_head=b["tree_head"].replace(b["tree_head"].split(".")[1], "eyJ0cmVlX3NpemUiOjl9")
        ),
        "head_invalid",
        "head_invalid",
    ),
    "tree head re-signed by another key": (
        lambda b: _resign_head(b, OTHER),
        "untrusted_key",
        "head_invalid",
    ),
    # The bundle's keys are never used against the reader's: swapping them changes nothing.
    "key swapped for another": (
        lambda b: b["jwks"]["keys"].__setitem__(0, public_jwk(OTHER)),
        None,
        "head_invalid",
    ),
    "key's x edited (its kid no longer its thumbprint)": (
        lambda b: b["jwks"]["keys"][0].update(x=public_jwk(OTHER)["x"]),
        None,
        "malformed",
    ),
    "remote key swapped under its kid": (
        lambda b: b["jwks"]["keys"][1].update(
            SigningKey.generate("ES256").verification_key().to_jwk(), kid=REMOTE.kid
        ),
        None,
        "malformed",
    ),
    "token digest edited": (
        lambda b: b["tokens"][0].update(claims_digest="sha-256:" + "cd" * 32),
        "token_mismatch",
        "token_mismatch",
    ),
    "receipt edited in the list": (
        lambda b: b["receipts"][0]["receipt"].update(signature="AAAA"),
        "receipt_invalid",
        "receipt_invalid",
    ),
    "private key member added": (
        lambda b: b["jwks"]["keys"][0].update(d="AAAA"),
        "malformed",
        "malformed",
    ),
    "format changed": (lambda b: b.update(format="something/2"), "malformed", "malformed"),
    # An optional member: absent is [], a statement that is no statement vouches for nothing.
    "successions empty": (lambda b: b.update(successions=[]), None, None),
    "successions holding no statement": (
        lambda b: b.update(successions=["x", "a.b.c", "", "...", "\u00e9.\u00e9.\u00e9"]),
        None,
        None,
    ),
    "successions not an array": (lambda b: b.update(successions="a.b.c"), "malformed", "malformed"),
    "successions null": (lambda b: b.update(successions=None), "malformed", "malformed"),
    "a succession not a string": (
        lambda b: b.update(successions=[{"protected": "a"}]),
        "malformed",
        "malformed",
    ),
    "seventeen successions": (lambda b: b.update(successions=["x"] * 17), "malformed", "malformed"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_tampering_with_any_part_fails_alike_in_both_verifiers(case: str, tmp_path: Path) -> None:
    """An event, a proof node, the tree head, a key, a token digest or a receipt edited:
    both verifiers reach the same verdict with the same reason code, against the
    reader's keys and in a structure-only check."""
    tamper, anchored, unanchored = EDITS[case]
    forged = copy.deepcopy(genuine_bundle(tmp_path / "l.db"))
    tamper(forged)
    assert both(forged, tmp_path) == (anchored, anchored)
    assert both(forged, tmp_path, "unanchored") == (unanchored, unanchored)


def _signed(payload: bytes, **header: Any) -> str:
    """A receipt-shaped JWS the remote signs with its real key, as it pleases."""
    headers = {"kid": REMOTE.kid, "typ": "a2a-receipt+jwt", **header}
    return jwt.api_jws.encode(payload, REMOTE.private_key, algorithm="ES256", headers=headers)


# What the remote, with its real key, may state against what the coordinator recorded.
RECEIPT_LIES: dict[str, tuple[Callable[[], str], str]] = {
    "another final state": (
        lambda: issue_receipt(claims(state="TASK_STATE_FAILED"), REMOTE),
        "receipt_mismatch",
    ),
    "a later attempt": (lambda: issue_receipt(claims(attempt=2), REMOTE), "receipt_mismatch"),
    "attempt 0": (lambda: issue_receipt(claims(attempt=0), REMOTE), "receipt_mismatch"),
    "another handoff": (
        lambda: issue_receipt(claims(handoff_id="handoff-9"), REMOTE),
        "receipt_mismatch",
    ),
    "no token, though one was minted": (
        lambda: issue_receipt(claims(jti=None, req_digest=None), REMOTE),
        "receipt_mismatch",
    ),
    "other artifacts": (
        lambda: issue_receipt(claims(artifact_digest=artifact_digest([])), REMOTE),
        "artifact_mismatch",
    ),
    "a header member more": (
        lambda: _signed(strict_json.dumps(claims()), cty="json"),
        "receipt_invalid",
    ),
    "another typ": (lambda: _signed(strict_json.dumps(claims()), typ="JWT"), "receipt_invalid"),
    "a duplicate claim": (
        lambda: _signed(b'{"state":"TASK_STATE_FAILED",' + strict_json.dumps(claims())[1:]),
        "receipt_invalid",
    ),
    "a payload that is no object": (lambda: _signed(b"[1]"), "receipt_invalid"),
}


@pytest.mark.parametrize("case", sorted(RECEIPT_LIES))
def test_a_remote_lying_with_its_own_key_is_caught_alike(case: str, tmp_path: Path) -> None:
    """The remote signs, with its real key, a receipt that contradicts the coordinator's
    record or is not of the receipt's exact form: both verifiers refuse it alike."""
    make, reason = RECEIPT_LIES[case]
    forged = prove(write_ledger(tmp_path / "l.db", {}, [make()]), artifacts=[CONTENT])
    assert both(forged, tmp_path) == (reason, reason)


def test_a_run_bundle_of_audit_export_is_checked_against_the_readers_key_too(
    tmp_path: Path,
) -> None:
    """`audit verify --bundle` also takes the older run bundle (`audit export`): its head
    must be signed by a coordinator key given; without one nothing is proven."""
    ledger = write_ledger(tmp_path / "l.db", {}, [issue_receipt(claims(), REMOTE)])
    anchors = Anchors.of([{"keys": [public_jwk(COORDINATOR)]}], [jwks_of(REMOTE)])
    genuine = json.loads(json.dumps(export_bundle(ledger, "run-a", COORDINATOR, now=AT)))
    assert verify_document(genuine, anchors).ok
    forged = json.loads(json.dumps(export_bundle(ledger, "run-a", OTHER, now=AT)))
    assert verify_document(forged, anchors).kind == "untrusted_key"
    assert verify_document(forged).kind == "no_anchor"
    structure_only = verify_document(forged, unanchored=True)
    assert structure_only.ok and not structure_only.anchored
    assert str(structure_only).startswith("unanchored: structure only, nothing proven")


# --- key successions: an auditor holding only the old key --------------------------------

# The remote rotates its card key: REMOTE vouches for NEW, and NEW later for NEWER.
NEW = SigningKey.generate("EdDSA")
NEWER = SigningKey.generate("ES256")
STRANGER = SigningKey.generate("EdDSA")


def identity(key: SigningKey) -> str:
    return identity_of(key.verification_key())


def succession(old: SigningKey, new: SigningKey) -> str:
    return sign_succession(old, new.verification_key(), AT)


def vouching(signer: SigningKey, **claims: Any) -> str:
    """A succession-typed statement ``signer`` signs over ``claims`` as it pleases."""
    values = {"iss": identity(signer), "successor": NEW.public_jwk(), "issued_at": "2025Z"}
    return sign_statement(values | claims, signer, SUCCESSION_TYP)


def successor_bundle(
    path: Path,
    signer: SigningKey = NEW,
    pinned: tuple[str, ...] | None = None,
    *,
    iss: str | None = None,
    aud: str | None = None,
    carried: list[str] | None = None,
) -> dict[str, Any]:
    """A run whose receipt ``signer`` signed (in ``iss``'s name, by default its own) for a
    token the ledger minted for ``aud`` (by default the signer's identity), proved with
    the remote's pinned key and the statements ``pinned`` (REMOTE -> NEW by default) as
    the registry keeps them; ``carried`` replaces what the bundle carries (an insider
    writes what it likes)."""
    receipt = issue_receipt(claims(iss=iss or identity(signer)), signer)
    ledger = write_ledger(path, {"aud": aud or identity(signer)}, [receipt])
    statements = [succession(REMOTE, NEW)] if pinned is None else list(pinned)
    bundle = prove(ledger, artifacts=[CONTENT], successions=statements)
    if carried is not None:
        bundle["successions"] = carried
    return bundle


def test_a_successors_receipt_verifies_for_a_reader_holding_only_the_old_key(
    tmp_path: Path,
) -> None:
    """The remote's old key vouches for NEW, which signs the receipt in its own name for
    a token minted for it: the bundle carries the statement and the old key it starts
    from, and both verifiers accept it holding only that key, and say they followed it."""
    statement = succession(REMOTE, NEW)
    bundle = successor_bundle(tmp_path / "l.db", pinned=(statement,))
    assert bundle["successions"] == [statement]
    assert [k["kid"] for k in bundle["jwks"]["keys"]] == [
        public_jwk(COORDINATOR)["kid"],
        REMOTE.kid,
    ]
    assert both(bundle, tmp_path, remotes=(REMOTE,)) == (None, None)
    assert both(bundle, tmp_path) == (None, None)
    assert both(bundle, tmp_path, "unanchored") == (None, None)
    report = verify_proof_bundle(bundle, reader_anchors((REMOTE,)))
    assert report.successions == 1
    assert "remote keys extended by 1 key-succession statement(s)" in str(report)


def test_a_chain_of_successions_is_followed_in_any_order(tmp_path: Path) -> None:
    """Two rotations (REMOTE -> NEW -> NEWER): a receipt by NEWER verifies for a reader
    holding only REMOTE's key, whatever the order of the statements."""
    chain = (succession(REMOTE, NEW), succession(NEW, NEWER))
    bundle = successor_bundle(tmp_path / "l.db", NEWER, chain)
    assert bundle["successions"] == list(chain)
    assert both(bundle, tmp_path, remotes=(REMOTE,)) == (None, None)
    bundle["successions"].reverse()
    assert both(bundle, tmp_path, remotes=(REMOTE,)) == (None, None)


def test_without_its_succession_a_successors_receipt_is_untrusted(tmp_path: Path) -> None:
    """No statement, no key: the successor's receipt is untrusted_key for a reader holding
    only the old key (and for one holding a second agent's key too)."""
    bundle = successor_bundle(tmp_path / "l.db", pinned=())
    assert "successions" not in bundle
    assert both(bundle, tmp_path, remotes=(REMOTE,)) == ("untrusted_key", "untrusted_key")
    assert both(bundle, tmp_path) == ("untrusted_key", "untrusted_key")


def test_prove_writes_only_the_statements_a_receipt_needs(tmp_path: Path) -> None:
    """A bundle whose receipts the pinned keys sign carries no successions member (the
    bundles written before it existed read the same); statements leading to no receipt's
    key, or from no pinned key, are left out."""
    ledger = write_ledger(tmp_path / "l.db", {}, [issue_receipt(claims(), REMOTE)])
    unrelated = [succession(REMOTE, NEW), succession(STRANGER, NEWER)]
    bundle = prove(ledger, artifacts=[CONTENT], successions=unrelated)
    assert "successions" not in bundle and both(bundle, tmp_path) == (None, None)
    chained = successor_bundle(tmp_path / "c.db", NEW, (succession(STRANGER, NEW), *unrelated))
    assert chained["successions"] == unrelated[:1]


def test_prove_refuses_more_successions_than_a_bundle_may_carry(tmp_path: Path) -> None:
    """Seventeen rotations between the pinned key and the receipt's: `audit prove` refuses
    (successions_too_many) rather than write a bundle every verifier calls malformed."""
    keys = [REMOTE, *(SigningKey.generate("EdDSA") for _ in range(17))]
    chain = tuple(succession(old, new) for old, new in itertools.pairwise(keys))
    with pytest.raises(LedgerError) as refused:
        successor_bundle(tmp_path / "l.db", keys[-1], chain)
    assert refused.value.reason == "successions_too_many"


def _with_coordinator_successor(path: Path) -> dict[str, Any]:
    """The coordinator's operator signs the head with a new key and carries a statement
    by the coordinator's real key vouching for it."""
    coordinator = SigningKey.from_private_key(COORDINATOR)
    new_head_key = Ed25519PrivateKey.generate()
    new = SigningKey.from_private_key(new_head_key)
    ledger = write_ledger(path, {}, [issue_receipt(claims(), REMOTE)])
    bundle = prove(ledger, new_head_key, artifacts=[CONTENT])
    bundle["successions"] = [succession(coordinator, new)]
    return bundle


def test_the_coordinators_anchors_are_never_extended(tmp_path: Path) -> None:
    """A tree head by a key the coordinator's key vouches for is untrusted_key, even for a
    reader who also gave the coordinator's key as a remote one (the statement is then
    followed, for receipts only)."""
    bundle = _with_coordinator_successor(tmp_path / "l.db")
    coordinator = SigningKey.from_private_key(COORDINATOR)
    assert both(bundle, tmp_path, remotes=(REMOTE, coordinator)) == ("untrusted_key",) * 2


def _colluder_vouches(path: Path, **receipt: str) -> dict[str, Any]:
    return successor_bundle(path, pinned=(), carried=[succession(COLLUDER, NEW)], **receipt)


# What a party may carry or sign to pass a key off as a remote's, and what the reader
# holding the remote's and a second agent's keys answers.
SUCCESSION_FORGERIES: dict[str, tuple[Callable[[Path], dict[str, Any]], str]] = {
    "the colluder's successor signs for a token minted for the remote": (
        lambda path: _colluder_vouches(path, aud=AUD),
        "receipt_mismatch",
    ),
    "the colluder's successor signs in the remote's name": (
        lambda path: _colluder_vouches(path, iss=AUD, aud=AUD),
        "receipt_issuer_mismatch",
    ),
    "the colluder vouches in the remote's name": (
        lambda path: successor_bundle(path, pinned=(), carried=[vouching(COLLUDER, iss=AUD)]),
        "untrusted_key",
    ),
    "the colluder signs under the remote's kid": (
        lambda path: successor_bundle(
            path,
            pinned=(),
            carried=[
                jwt.api_jws.encode(
                    strict_json.dumps({"iss": AUD, "successor": NEW.public_jwk()}),
                    COLLUDER.private_key,
                    algorithm="EdDSA",
                    headers={"kid": REMOTE.kid, "typ": SUCCESSION_TYP},
                )
            ],
        ),
        "untrusted_key",
    ),
    "a key not given vouches": (
        lambda path: successor_bundle(path, pinned=(), carried=[succession(STRANGER, NEW)]),
        "untrusted_key",
    ),
    "the successor vouches for itself": (
        lambda path: successor_bundle(path, pinned=(), carried=[succession(NEW, NEW)]),
        "untrusted_key",
    ),
    "the second link without the first": (
        lambda path: successor_bundle(path, NEWER, (), carried=[succession(NEW, NEWER)]),
        "untrusted_key",
    ),
    "the remote vouches for a private key": (
        lambda path: successor_bundle(
            path, pinned=(), carried=[vouching(REMOTE, successor={**NEW.public_jwk(), "d": "A"})]
        ),
        "untrusted_key",
    ),
    "the remote vouches for a key under another kid": (
        lambda path: successor_bundle(
            path,
            pinned=(),
            carried=[vouching(REMOTE, successor={**NEW.public_jwk(), "kid": REMOTE.kid})],
        ),
        "untrusted_key",
    ),
    "the remote signs a statement of another typ": (
        lambda path: successor_bundle(
            path,
            pinned=(),
            carried=[
                sign_statement(
                    {"iss": AUD, "successor": NEW.public_jwk()}, REMOTE, "a2a-receipt+jwt"
                )
            ],
        ),
        "untrusted_key",
    ),
    "the coordinator's head by a key its key vouches for": (
        _with_coordinator_successor,
        "untrusted_key",
    ),
}


@pytest.mark.parametrize("case", sorted(SUCCESSION_FORGERIES))
def test_a_succession_speaks_only_for_its_signers_key(case: str, tmp_path: Path) -> None:
    """A statement adds a key only when a key the reader holds (or reached) signed it in
    its own name, and the key it adds signs only in its own name: every forgery is refused
    alike by both verifiers."""
    forge, reason = SUCCESSION_FORGERIES[case]
    assert both(forge(tmp_path / "l.db"), tmp_path) == (reason, reason)


# --- the two verifiers agree on arbitrary edits -----------------------------------------


def _standalone_module() -> Any:
    """docs/verifier/verify_bundle.py, loaded in-process (it imports nothing of ours)."""
    spec = importlib.util.spec_from_file_location("verify_bundle", VERIFIER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    return module


def their_remotes() -> dict[str, dict[str, str]]:
    """The reader's remote keys by thumbprint, as the stand-alone verifier holds them."""
    return {key.kid: key.verification_key().to_jwk() for key in (REMOTE, COLLUDER)}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for name, item in value.items():
            found += _paths(item, (*path, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


EDIT_CHARACTERS = ["0", "a", "Z", "_", "-", "{", "}", "\\", '"', "'", ":", ",", "é"]


def _mutate(bundle: dict[str, Any], rng: random.Random) -> None:
    """One random edit: a value replaced, a character changed, a member dropped, or a
    JSON text inside the bundle (an event's record, artifacts) edited and re-serialised."""
    path = rng.choice(_paths(bundle)[1:])
    parent = bundle
    for step in path[:-1]:
        parent = parent[step]
    value, last = parent[path[-1]], path[-1]
    choice = rng.randrange(5)
    if choice == 0 and isinstance(value, str) and value:
        at = rng.randrange(len(value))
        parent[last] = value[:at] + rng.choice(EDIT_CHARACTERS) + value[at + 1 :]
    elif choice == 1 and isinstance(parent, dict):
        del parent[last]
    elif choice == 2 and isinstance(value, str) and value.startswith(("{", "[")):
        inner = json.loads(value)
        _mutate({"x": inner}, rng)
        parent[last] = json.dumps(inner, separators=(",", ":"), sort_keys=rng.random() < 0.5)
    else:
        parent[last] = rng.choice([None, True, 0, 1, -1, 2**60, 1.5, "", "x", [], {}])


def test_the_two_verifiers_agree_on_random_edits(tmp_path: Path) -> None:
    """Four hundred seeded random edits of a genuine bundle, each checked by both
    verifiers against the reader's keys and structure-only: the same verdict and reason
    code every time, and never an exception."""
    theirs = _standalone_module()
    genuine = genuine_bundle(tmp_path / "l.db")
    ours_anchors = reader_anchors()
    by_thumbprint = {public_jwk(COORDINATOR)["kid"]: public_jwk(COORDINATOR)}
    their_anchors = theirs.Anchors(by_thumbprint, their_remotes())
    rng = random.Random(27)
    reasons: set[str | None] = set()
    for _ in range(400):
        forged = copy.deepcopy(genuine)
        for _ in range(rng.choice([1, 1, 2])):
            _mutate(forged, rng)
        ours = verify_proof_bundle(forged, ours_anchors)
        answer = theirs.verify(forged, their_anchors)
        assert (None if ours.ok else str(ours.kind)) == answer["reason"], (forged, ours, answer)
        structure = verify_proof_bundle(forged, unanchored=True)
        answer = theirs.verify(forged, None, True)
        assert (None if structure.ok else str(structure.kind)) == answer["reason"], forged
        reasons.add(answer["reason"])
    assert len(reasons) >= 6


LIES = [None, 0, 2, "x", "task-1", "handoff-3", "jti-1", AUD, REQ, "TASK_STATE_FAILED", [], {}]


def relogged(records: list[dict[str, Any]], stated: dict[str, Any], path: Path) -> dict[str, Any]:
    """The bundle of a ledger at ``path`` holding ``records`` again, each receipt event
    re-signed by the remote over ``stated``: a lie each party signs with its own key."""
    ledger = Ledger(open_engine(f"sqlite+pysqlite:///{path}"))
    migrate(ledger.engine)
    for record in records:
        fields = {name: record[name] for name in CORRELATION_FIELDS if name != "recorded_at"}
        data = record["data"]
        if records_receipt(record["event_type"], data):
            data = {**data, **receipt_data(issue_receipt(stated, REMOTE))}
        ledger.append(AuditEvent(**fields, data=data))
    forged = prove(ledger, artifacts=[CONTENT])
    ledger.engine.dispose()
    return forged


def _insider_edit(
    records: list[dict[str, Any]], stated: dict[str, Any], rng: random.Random
) -> None:
    """One lie, by the party that holds the key to sign it: the remote states another
    claim, or the coordinator records another fact (a correlation field or a datum)."""
    if rng.random() < 0.4:
        stated[rng.choice(list(stated))] = rng.choice(LIES)
        return
    record = rng.choice([r for r in records if r["event_type"] != "handoff.receipt"])
    if rng.random() < 0.3:
        name = rng.choice(["handoff_id", "remote_task_id"])
        record[name] = rng.choice([None, "x", "task-1", "handoff-3"])
    else:
        name = rng.choice([*_facts_of(record), "remote_state", "aud", "jti", "req_digest"])
        record["data"][name] = rng.choice(LIES)


def _facts_of(record: dict[str, Any]) -> list[str]:
    """The members of a record's data a coordinator's lie may change (a receipt it
    carries is the remote's to sign)."""
    return [name for name in record["data"] if name not in ("receipt", "kid")]


@pytest.mark.parametrize("carried", [False, True], ids=["receipt-alone", "receipt-on-verdict"])
def test_the_two_verifiers_agree_on_random_insider_lies(tmp_path: Path, carried: bool) -> None:
    """Forty seeded lies, each signed by the party telling it (the remote re-signs its
    receipt, the coordinator re-signs a head over its rewritten ledger): both verifiers
    reach the same verdict with the same reason code, whether the receipt is an event of
    its own (format 3's ledgers) or rides on its verdict."""
    theirs = _standalone_module()
    genuine = genuine_bundle(tmp_path / "g.db", carried=carried)
    ours_anchors = reader_anchors()
    their_anchors = theirs.Anchors(
        {public_jwk(COORDINATOR)["kid"]: public_jwk(COORDINATOR)}, their_remotes()
    )
    rng = random.Random(9278)
    reasons: set[str | None] = set()
    for index in range(40):
        records = [json.loads(entry["canonical"]) for entry in genuine["events"]]
        stated = claims()
        _insider_edit(records, stated, rng)
        forged = relogged(records, stated, tmp_path / f"{index}.db")
        ours = verify_proof_bundle(forged, ours_anchors)
        answer = theirs.verify(forged, their_anchors)
        assert (None if ours.ok else str(ours.kind)) == answer["reason"], (stated, ours, answer)
        reasons.add(answer["reason"])
    assert {"receipt_mismatch", None} <= reasons
