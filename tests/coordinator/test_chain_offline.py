"""A chain the owner minted checks offline, and a verifier written from the docs alone
(tests/outside_chain_verifier.py) agrees with ours (contracts.chain) on every link.

The genuine chain is owner -> privacy -> legal -> legal-2, minted by exchange at a real
coordinator. Each variant is a child rewritten and re-signed with the owner's own key
(what a faulty or dishonest owner could sign): both verifiers must name the same broken
link and reason.

On the same federation, the privacy team's skill sub-delegates with the kit's one call to
the legal team and to an unmodified agent behind the guard: the run's one proof bundle
verifies every hop's receipt with that party's own key, in our verifier, the one written
from the docs (tests/outside_verifier.py) and the one shipped (docs/verifier). Forged hop
receipts are refused at return admission, and, written into a bundle by a faulty owner,
by every verifier with the same reason.
"""

from __future__ import annotations

import copy
import importlib.util
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.identity import identity_of
from agent_cards.keys import KeySet, SigningKey, b64url_encode, load_key_set
from agent_cards.transparency.receipts import RECEIPT_TYP, verified_receipt
from agent_cards.transparency.statements import sign_statement
from contracts import strict_json
from contracts.chain import chain_problem
from contracts.grant import Grant
from coordinator.audit.anchors import Anchors
from coordinator.audit.log.chain import Ledger
from coordinator.audit.log.events import AuditEvent
from coordinator.audit.proof_check import verify_proof_bundle
from coordinator.audit.proofs import prove_run
from coordinator.audit.receipts import compact, receipt_data
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.identity import coordinator_keys
from coordinator.storage.datadir import DataDir
from coordinator.storage.engine import DATABASE_FILE, open_engine
from tests import outside_chain_verifier as outside
from tests import outside_verifier
from tests.chains import (
    GUARDED,
    GUARDED_SKILL,
    OPERATOR,
    PRIVACY,
    REVIEW_SKILL,
    TERMS,
    TERMS_2,
    TERMS_SKILL,
    TEXT_INPUT,
    ChainFederation,
    chain_federation,
    claims_of,
    half,
)

Claims = dict[str, Any]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChainFederation]:
    with chain_federation(tmp_path_factory.mktemp("offline")) as federation:
        yield federation


@pytest.fixture(scope="module")
def genuine(chain: ChainFederation) -> tuple[list[str], Any, KeySet]:
    return build(chain), owner_jwks(chain), load_key_set(chain.data_dir / "keys")


def owner_jwks(chain: ChainFederation) -> Any:
    return httpx.get(f"{chain.url}/.well-known/jwks.json").json()


def build(chain: ChainFederation) -> list[str]:
    root, parent, _ = chain.parent_token()
    second = chain.exchange(root, PRIVACY, TERMS, half(parent)).json()["access_token"]
    child = Grant.model_validate(claims_of(second))
    third = chain.exchange(second, TERMS, TERMS_2, half(child, actions=0))
    return [root, second, third.json()["access_token"]]


def ours(tokens: list[str]) -> tuple[int, str] | None:
    grants = [Grant.model_validate(claims_of(token)) for token in tokens]
    return chain_problem(list(zip(tokens, grants, strict=True)))


def unsigned_resign(keys: KeySet, claims: Claims) -> str:
    """``claims`` signed by the owner's key, whatever they hold (a faulty owner)."""
    from jwt.algorithms import get_default_algorithms

    key = keys.signing_key()
    header = {"alg": key.alg, "kid": key.kid, "typ": "delegation+jwt"}
    signing_input = (
        f"{b64url_encode(strict_json.dumps(header))}.{b64url_encode(strict_json.dumps(claims))}"
    )
    signature = get_default_algorithms()[key.alg].sign(signing_input.encode(), key.private_key)
    return f"{signing_input}.{b64url_encode(signature)}"


def _set(path: str, value: Any) -> Callable[[Claims, list[str]], None]:
    def change(claims: Claims, tokens: list[str]) -> None:
        target = claims
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value(claims, tokens) if callable(value) else value

    return change


DELETE = object()
VARIANTS: dict[str, Callable[[Claims, list[str]], None]] = {
    "genuine": lambda claims, tokens: None,
    "no_parent": _set("parent", DELETE),
    "parent_hash_of_another_token": _set("parent.hash", lambda c, t: outside.token_hash(t[2])),
    "parent_jti_of_another_token": _set("parent.jti", "jti-someone-else"),
    "issuer_changed": _set("iss", "urn:another-owner"),
    "principal_changed": _set("sub", "run:another"),
    "tenant_changed": _set("tenant", "another-tenant"),
    "scope_widened": _set("scope", "terms:check privacy:review admin:all"),
    "outlives_parent": _set("exp", lambda c, t: c["exp"] + 3600),
    "more_actions": _set("handoff.budget.actions", 1000),
    "more_context_units": _set("handoff.budget.context_units", 10**9),
    "model_limit_dropped": _set("handoff.budget.model_requests", DELETE),
    "final_owner_changed": _set("handoff.final_owner", "someone-else"),
    "act_not_deeper": _set("act", lambda c, t: c["act"]["act"]),
    "act_names_another_holder": _set("act.sub", "urn:not-the-holder"),
    "cnf_names_another_key": _set("cnf.jkt", "A" * 43),
    "cnf_names_the_audience": _set("cnf.jkt", lambda c, t: c["aud"].rpartition(":")[2]),
    "loop_to_an_actor": _set("aud", lambda c, t: c["act"]["sub"]),
    "loop_to_the_owner": _set("aud", lambda c, t: c["iss"]),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("link", [1, 2])
def test_the_outside_verifier_agrees_with_ours(
    genuine: tuple[list[str], Any, KeySet], variant: str, link: int
) -> None:
    tokens, jwks, keys = genuine
    claims = copy.deepcopy(claims_of(tokens[link]))
    VARIANTS[variant](claims, tokens)
    forged = [*tokens[:link], unsigned_resign(keys, claims)]
    theirs = outside.check(forged, jwks)
    assert ours(forged) == theirs
    assert (theirs is None) == (variant == "genuine"), theirs


def test_a_chain_deeper_than_the_limit_is_refused_alike(
    genuine: tuple[list[str], Any, KeySet],
) -> None:
    """A fourth hop the owner would never mint, signed with its key anyway."""
    tokens, jwks, keys = genuine
    last = claims_of(tokens[-1])
    fourth = copy.deepcopy(last)
    fourth["act"] = {"sub": last["aud"], "act": last["act"]}
    fourth["aud"] = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:" + "B" * 43
    fourth["jti"] = "jti-fourth"
    fourth["cnf"] = {"jkt": last["aud"].rpartition(":")[2]}  # bound to its holder
    fourth["parent"] = {"jti": last["jti"], "hash": outside.token_hash(tokens[-1])}
    forged = [*tokens, unsigned_resign(keys, fourth)]
    assert ours(forged) == outside.check(forged, jwks) == (3, "chain_too_deep")


# --- every hop's receipt in the run's one proof bundle -------------------------------------

VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verifier" / "verify_bundle.py"
GUARDED_INPUT: dict[str, Any] = {"text": "the quick fox"}
HOPS: list[tuple[str, str, Mapping[str, Any]]] = [
    (TERMS, TERMS_SKILL, TEXT_INPUT),
    (GUARDED, GUARDED_SKILL, GUARDED_INPUT),
]
STRANGER = SigningKey.generate()


@dataclass(frozen=True)
class Relayed:
    """A run whose privacy team sub-delegated to every agent of ``HOPS``."""

    document: dict[str, Any]
    events: list[dict[str, Any]]
    bundle: dict[str, Any]


def relayed_run(chain: ChainFederation, forge: Forge | None = None) -> Relayed:
    chain.capture.relay, chain.capture.relay_to, chain.capture.forge = True, HOPS, forge
    try:
        document = chain.delegate(PRIVACY, REVIEW_SKILL, TEXT_INPUT)
    finally:
        chain.capture.relay, chain.capture.forge = False, None
    run = f"{chain.url}/v1/audit/runs/{document['run_id']}"
    events = chain.client.get(f"{run}/export", headers=OPERATOR).json()["events"]
    bundle = chain.client.post(f"{run}/prove", headers=OPERATOR).json()
    return Relayed(document, events, bundle)


@pytest.fixture(scope="module")
def relayed(chain: ChainFederation) -> Relayed:
    return relayed_run(chain)


def remote_keys(chain: ChainFederation, *names: str) -> list[dict[str, Any]]:
    """What the reader holds of each party: its published keys."""
    return [chain.keys[name].public_jwks() for name in names]


PARTIES = (PRIVACY, TERMS, GUARDED)


def verdicts(
    chain: ChainFederation, bundle: dict[str, Any], remotes: list[dict[str, Any]]
) -> tuple[tuple[str | None, int | None], ...]:
    """(reason, seq) of ours, the outside verifier and the shipped one; None when it verifies."""
    coordinator = owner_jwks(chain)
    report = verify_proof_bundle(bundle, Anchors.of([coordinator], remotes))
    ours = (None, None) if report.ok else (str(report.kind), report.seq)
    theirs = outside_verifier.verify_detailed(bundle, [coordinator], remotes)
    shipped_module = sys.modules.get("shipped_verify_bundle") or shipped()
    anchors = shipped_module.Anchors(
        shipped_module.key_set(coordinator),
        {kid: jwk for document in remotes for kid, jwk in shipped_module.key_set(document).items()},
    )
    answer = shipped_module.verify(bundle, anchors)
    return (
        ours,
        (theirs.reason, theirs.seq if theirs.reason else None),
        (answer["reason"], answer.get("seq")),
    )


def shipped() -> Any:
    spec = importlib.util.spec_from_file_location("shipped_verify_bundle", VERIFIER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    return module


def hop_seqs(bundle: dict[str, Any]) -> list[int]:
    return [entry["seq"] for entry in bundle["hop_receipts"]]


def test_one_bundle_verifies_every_hop_with_each_partys_key(
    chain: ChainFederation, relayed: Relayed
) -> None:
    bundle = relayed.bundle
    assert bundle["format"] == "a2a-federation.audit-proof/4"
    exchanged = [e["data"] for e in relayed.events if e["event_type"] == "delegation.exchanged"]
    assert [hop["to"] for hop in exchanged] == [TERMS, GUARDED]
    # each hop's receipt, kept under the privacy team's handoff, states its child
    kept = [e for e in relayed.events if e["event_type"] == "hop.receipt"]
    assert len(kept) == len(hop_seqs(bundle)) == 2
    for event, hop in zip(kept, exchanged, strict=True):
        claims = verified_receipt(compact(event["data"]["receipt"]), party_keys(chain, hop["to"]))
        assert (claims["jti"], claims["handoff_id"], claims["iss"]) == (
            hop["jti"],
            hop["handoff_id"],
            hop["aud"],
        )
        assert event["handoff_id"] == hop["parent_handoff_id"]
    remotes = remote_keys(chain, *PARTIES)
    assert verdicts(chain, bundle, remotes) == ((None, None),) * 3
    report = verify_proof_bundle(bundle, Anchors.of([owner_jwks(chain)], remotes))
    checked = {r["agent"]: r["kid"] for r in report.receipts}
    assert checked == {name: chain.keys[name].active.kid for name in PARTIES}


def party_keys(chain: ChainFederation, name: str) -> Any:
    from agent_cards.trusted import TrustedKeys

    return TrustedKeys.from_json(chain.keys[name].public_jwks())


@pytest.mark.parametrize("how", ["removed", "replaced"])
@pytest.mark.parametrize("party", [TERMS, GUARDED])
def test_a_bundle_without_a_hops_own_key_is_refused(
    chain: ChainFederation, relayed: Relayed, party: str, how: str
) -> None:
    others = [name for name in PARTIES if name != party]
    remotes = remote_keys(chain, *others)
    if how == "replaced":
        remotes.append(KeySet(active=STRANGER).public_jwks())
    seq = hop_seqs(relayed.bundle)[[TERMS, GUARDED].index(party)]
    assert verdicts(chain, relayed.bundle, remotes) == (("untrusted_key", seq),) * 3


Forge = Callable[[list[str]], list[str]]


def resigned(receipt: str, key: SigningKey, **changes: Any) -> str:
    claims = {**claims_of(receipt), **changes}
    return sign_statement(claims, key, RECEIPT_TYP)


def _identity(key: SigningKey) -> str:
    return identity_of(key.verification_key())


def forgeries(chain: ChainFederation) -> dict[str, tuple[Callable[[str], str], str, str]]:
    """Each forgery of the legal team's receipt: what it does, the reason return admission
    refuses it with, and the reason every verifier gives when a faulty owner keeps it."""
    holder, terms = chain.keys[PRIVACY].active, chain.keys[TERMS].active
    return {
        "signed_by_the_holder": (
            lambda r: resigned(r, holder, iss=_identity(holder)),
            "hop_receipt_invalid",
            "receipt_mismatch",
        ),
        "signed_by_the_holder_in_the_agents_name": (
            lambda r: resigned(r, holder),
            "hop_receipt_invalid",
            "receipt_issuer_mismatch",
        ),
        "signed_by_a_stranger": (
            lambda r: resigned(r, STRANGER, iss=_identity(STRANGER)),
            "hop_receipt_invalid",
            "untrusted_key",
        ),
        "bound_to_another_jti": (
            lambda r: resigned(r, terms, jti="jti-" + "0" * 32),
            "hop_receipt_mismatch",
            "receipt_mismatch",
        ),
        "bound_to_another_handoff": (
            lambda r: resigned(r, terms, handoff_id="hop-0000000000000000"),
            "hop_receipt_mismatch",
            "receipt_mismatch",
        ),
    }


FORGERIES = (
    "signed_by_the_holder",
    "signed_by_the_holder_in_the_agents_name",
    "signed_by_a_stranger",
    "bound_to_another_jti",
    "bound_to_another_handoff",
)


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_hop_receipt_is_refused_at_admission(chain: ChainFederation, forgery: str) -> None:
    forge, reason, _ = forgeries(chain)[forgery]
    run = relayed_run(chain, lambda kept: [forge(kept[0]), *kept[1:]])
    assert run.document["local_state"] == "REJECTED", run.document
    assert run.document["reason"] == reason
    refused = [e["data"] for e in run.events if e["event_type"] == "hop.receipt_refused"]
    assert refused == [{"index": 0, "reason": reason}]
    kinds = [e["event_type"] for e in run.events]
    assert "hop.receipt" not in kinds and "artifact.admitted" not in kinds


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_hop_receipt_a_faulty_owner_keeps_fails_every_verifier(
    chain: ChainFederation, relayed: Relayed, forgery: str, tmp_path: Path
) -> None:
    forge, _, reason = forgeries(chain)[forgery]
    [genuine, _] = [e for e in relayed.events if e["event_type"] == "hop.receipt"]
    bundle = owner_keeps(chain, tmp_path, genuine, forge(compact(genuine["data"]["receipt"])))
    seq = hop_seqs(bundle)[-1]
    assert verdicts(chain, bundle, remote_keys(chain, *PARTIES)) == ((reason, seq),) * 3


def owner_keeps(
    chain: ChainFederation, tmp_path: Path, genuine: dict[str, Any], receipt: str
) -> dict[str, Any]:
    """The run's bundle from a copy of the owner's ledger to which it appended ``receipt``
    as a hop receipt of the same handoff, signed with the owner's own key."""
    source = sqlite3.connect(chain.data_dir / DATABASE_FILE)
    with closing(source), closing(sqlite3.connect(tmp_path / DATABASE_FILE)) as copy_:
        source.backup(copy_)
    ledger = Ledger(open_engine(tmp_path))
    names = ("run_id", "handoff_id", "attempt", "remote_task_id", "trace_id")
    ledger.append(
        AuditEvent(
            event_type="hop.receipt",
            actor="coordinator",
            data=receipt_data(receipt),
            **{name: genuine[name] for name in names},
        )
    )
    private_key = coordinator_keys(DataDir(chain.data_dir)).active.private_key
    assert isinstance(private_key, Ed25519PrivateKey)
    return prove_run(ledger, str(genuine["run_id"]), private_key, issuer=DEFAULT_ISSUER)


def test_a_format_2_bundle_still_verifies_and_a_relabelled_one_still_has_its_hops_checked(
    chain: ChainFederation, relayed: Relayed
) -> None:
    """Bundles made before hop receipts (format 2, no ``hop_receipts``) verify as before;
    a format 3 bundle relabelled as 2 gains nothing: every hop receipt event is checked."""
    _, _, run_id = chain.parent_token()  # no hop: what a format 2 bundle held
    plain = chain.client.post(f"{chain.url}/v1/audit/runs/{run_id}/prove", headers=OPERATOR)
    remotes = remote_keys(chain, *PARTIES)
    for bundle in (plain.json(), relayed.bundle):
        older = {k: v for k, v in bundle.items() if k != "hop_receipts"}
        older["format"] = "a2a-federation.audit-proof/2"
        assert verdicts(chain, older, remotes) == ((None, None),) * 3
    seq = hop_seqs(relayed.bundle)[0]
    assert (
        verdicts(chain, older, remote_keys(chain, PRIVACY, GUARDED))
        == (("untrusted_key", seq),) * 3
    )
    # and a format 3 bundle must list them (a reader of format 2 refuses it: malformed)
    unlisted = {k: v for k, v in relayed.bundle.items() if k != "hop_receipts"}
    assert verdicts(chain, unlisted, remotes) == (("malformed", 0),) * 3
