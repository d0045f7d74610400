"""A signed statement (receipt, tree head) verifies only in the spelling its signer wrote.

The receipt check reads every segment with the one strict base64url decoder, also the
signature: a signature segment respelt with non-zero unused trailing bits decodes to the
same bytes, and a lenient decoder would let that second spelling verify.
"""

from __future__ import annotations

import pytest

from agent_cards.identity import identity_of
from agent_cards.keys import SigningKey
from agent_cards.transparency.statements import StatementInvalid, sign_statement, verify_statement
from agent_cards.trusted import TrustedKeys

TYP = "receipt+jws"


def _signed(alg: str = "EdDSA") -> tuple[str, TrustedKeys]:
    key = SigningKey.generate(alg)  # type: ignore[arg-type]
    claims = {"iss": identity_of(key.verification_key()), "task_id": "t-1"}
    return sign_statement(claims, key, TYP), TrustedKeys([key.verification_key()])


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_a_statement_verifies_as_signed(alg: str) -> None:
    jws, keys = _signed(alg)
    assert verify_statement(jws, keys, TYP)["task_id"] == "t-1"


def test_a_respelt_signature_segment_is_refused() -> None:
    jws, keys = _signed()
    head, payload, signature = jws.split(".")
    # 64 bytes in 86 characters: the last one carries 4 unused bits, zero as written
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    respelt = signature[:-1] + last[last.index(signature[-1]) + 1]
    with pytest.raises(StatementInvalid) as refused:
        verify_statement(f"{head}.{payload}.{respelt}", keys, TYP)
    assert refused.value.reason == "signature_invalid"


@pytest.mark.parametrize("part", [1, 2], ids=["payload", "signature"])
def test_a_changed_segment_is_signature_invalid(part: int) -> None:
    jws, keys = _signed()
    parts = jws.split(".")
    parts[part] = parts[part][:-2] + ("AA" if not parts[part].endswith("AA") else "BA")
    with pytest.raises(StatementInvalid) as refused:
        verify_statement(".".join(parts), keys, TYP)
    assert refused.value.reason == "signature_invalid"


def test_an_ed25519_statement_is_verified_without_pyjwt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: PyJWT's decode scanned each statement byte by byte in Python (two per
    governed handoff: the receipt and its log head); an Ed25519 key verifies itself."""
    import jwt

    def refuse(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("PyJWT's decode on the Ed25519 path")

    monkeypatch.setattr(jwt.api_jws, "decode", refuse)
    jws, keys = _signed()
    assert verify_statement(jws, keys, TYP)["task_id"] == "t-1"
