"""Figure (3): what the delegation checks cost beyond a bare ``jwt.decode``.

Both verify the same freshly minted EdDSA token with the key already parsed: the bare
side is ``jwt.decode`` (signature, ``exp``/``nbf``/``iat``, ``aud``); the governed side
is :meth:`member_kit.trust.verifier.DelegationVerifier.verify` with every check it makes
(shape, strict header, issuer and kid lookup, signature, strict payload, claim types,
times, audience, act chain, grant shape, request binding). The replay claim is left out
on both sides (it is a database write, measured in figure 1). Each side is timed in
``repeat`` batches of ``number`` calls and the median batch is used. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import jwt

from agent_cards.keys import KeySet, SigningKey
from bench.tokens import RISK_SCOPE, TokenMinter
from coordinator.authority.delegator import DEFAULT_ISSUER
from member_kit.trust.verifier import DelegationVerifier

AUDIENCE = "http://127.0.0.1:9/a2a/jsonrpc"


def per_call(call: Callable[[], object], number: int, repeat: int) -> list[float]:
    for _ in range(max(1, number // 10)):
        call()
    batches = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            call()
        batches.append((time.perf_counter() - started) / number)
    return batches


def measure(number: int, repeat: int) -> dict[str, object]:
    key = SigningKey.generate()
    keys = KeySet(active=key)
    minter = TokenMinter(key, AUDIENCE)
    token = minter.mint("handoff-bench")
    public_key = key.verification_key().public_key
    verifier = DelegationVerifier({DEFAULT_ISSUER: keys.trusted_keys()}, AUDIENCE)

    def bare() -> object:
        return jwt.decode(token, public_key, algorithms=[key.alg], audience=AUDIENCE)

    def governed() -> object:
        return verifier.verify(
            token,
            skill_id="interpret-risk-policy",
            required_scopes=(RISK_SCOPE,),
            handoff_id="handoff-bench",
            read_only=True,
        )

    governed_batches = per_call(governed, number, repeat)
    bare_batches = per_call(bare, number, repeat)
    return {
        "verify_us": [b * 1e6 for b in governed_batches],
        "decode_us": [b * 1e6 for b in bare_batches],
        "ratio": statistics.median(governed_batches) / statistics.median(bare_batches),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.number, args.repeat)))


if __name__ == "__main__":
    main()
