"""Issue 35: what a holder-bound token (RFC 9449 DPoP) costs the member to verify.

Both sides are :meth:`member_kit.trust.verifier.DelegationVerifier.verify` with every
check it makes, the key already parsed, the replay claim left out: the baseline verifies
today's token (no ``cnf``); the bound side verifies the same token naming a holder key
(``cnf.jkt``) with a fresh proof per call (made ahead, outside the timing: the proof is
the caller's cost). Each side is timed in ``repeat`` batches of ``number`` calls and the
median batch is used. One hop only: the three-hop chain with holder proof is figure
(3c), :mod:`bench.chain_cost`.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from agent_cards.keys import KeySet, SigningKey
from bench.tokens import RISK_SCOPE, delegation_claims
from contracts.grant import Grant
from coordinator.authority.delegator import DEFAULT_ISSUER
from coordinator.authority.holder import bound_to, proof
from coordinator.authority.tokens import mint_token
from member_kit.trust.holder_proof import HolderRequest
from member_kit.trust.verifier import DelegationVerifier

AUDIENCE = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:bench-member"
URL = "http://127.0.0.1:9/a2a/jsonrpc"


def timed(call: Callable[[int], object], number: int, repeat: int) -> list[float]:
    batches = []
    for round_ in range(repeat):
        started = time.perf_counter()
        for i in range(number):
            call(round_ * number + i)
        batches.append((time.perf_counter() - started) / number)
    return batches


def measure(number: int, repeat: int) -> dict[str, object]:
    key = SigningKey.generate()
    holder = SigningKey.generate()
    keys = KeySet(active=key)
    verifier = DelegationVerifier({DEFAULT_ISSUER: keys.trusted_keys()}, AUDIENCE)
    grant = Grant.model_validate(delegation_claims(AUDIENCE, "handoff-bench"))
    plain = mint_token(grant, key)
    bound = mint_token(bound_to(grant, holder), key)
    proofs = [proof(holder, "POST", URL, bound) for _ in range(number * repeat)]

    def check(token: str, holder_request: HolderRequest | None) -> object:
        return verifier.verify(
            token,
            skill_id="interpret-risk-policy",
            required_scopes=(RISK_SCOPE,),
            handoff_id="handoff-bench",
            read_only=True,
            holder=holder_request,
        )

    def today(_i: int) -> object:
        return check(plain, None)

    def holder_bound(i: int) -> object:
        return check(bound, HolderRequest(proofs[i], "POST", URL))

    for i in range(max(1, number // 10)):
        today(i)
    baseline = timed(today, number, repeat)
    measured = timed(holder_bound, number, repeat)
    return {
        "today_us": [b * 1e6 for b in baseline],
        "holder_bound_us": [b * 1e6 for b in measured],
        "ratio": statistics.median(measured) / statistics.median(baseline),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
