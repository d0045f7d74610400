"""Signing keys: thumbprint kids, owner-only persistence, rotation, and pinned trust stores."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.keys import (
    KeyMaterialError,
    SigningKey,
    TrustedKeys,
    b64url_encode,
    jwk_thumbprint,
    load_or_create,
    load_signing_key,
    signing_key_from_jwk,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_rfc8037_ed25519_thumbprint_vector() -> None:
    """The thumbprint of the RFC 8037 appendix A.3 example key matches the published value."""
    jwk = {"crv": "Ed25519", "kty": "OKP", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    assert jwk_thumbprint(jwk) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


@pytest.mark.parametrize("alg", ["EdDSA", "ES256"])
def test_kid_is_the_thumbprint_of_the_public_jwk(alg: str) -> None:
    """A generated key's kid is the RFC 7638 thumbprint of its own public JWK."""
    key = SigningKey.generate(alg)  # type: ignore[arg-type]
    assert key.kid == jwk_thumbprint(key.public_jwk())
    assert key.alg == alg


def test_public_jwk_members_for_each_algorithm() -> None:
    """Public JWKs carry exactly the profile's members and never private material."""
    okp = SigningKey.generate("EdDSA").public_jwk()
    ec = SigningKey.generate("ES256").public_jwk()
    assert set(okp) == {"kty", "crv", "x", "kid", "alg", "use"}
    assert set(ec) == {"kty", "crv", "x", "y", "kid", "alg", "use"}
    assert (okp["kty"], okp["crv"], okp["use"]) == ("OKP", "Ed25519", "sig")
    assert (ec["kty"], ec["crv"], ec["alg"]) == ("EC", "P-256", "ES256")


def test_load_or_create_writes_owner_only_files(tmp_path: Path) -> None:
    """First use creates a 0700 directory whose key files and manifest are 0600."""
    directory = tmp_path / "keys"
    key_set = load_or_create(directory)
    assert _mode(directory) == 0o700
    files = list(directory.iterdir())
    assert {f.name for f in files} == {"keyset.json", f"{key_set.active.kid}.pem"}
    assert all(_mode(f) == 0o600 for f in files)


def test_load_or_create_returns_the_same_key_on_the_next_start(tmp_path: Path) -> None:
    """A second start loads the persisted key instead of generating a new one."""
    first = load_or_create(tmp_path / "keys", alg="ES256")
    second = load_or_create(tmp_path / "keys")
    assert second.active.kid == first.active.kid
    assert second.active.alg == "ES256"


def test_rotation_keeps_the_old_key_for_verification_until_it_expires(tmp_path: Path) -> None:
    """After rotation the old key still verifies during the grace period, then drops out."""
    original = load_or_create(tmp_path / "keys")
    rotated = original.rotate(grace=timedelta(hours=1), now=NOW)
    assert rotated.active.kid != original.active.kid
    kids_now = [jwk["kid"] for jwk in rotated.public_jwks(NOW)["keys"]]
    assert kids_now == [rotated.active.kid, original.active.kid]
    later = NOW + timedelta(hours=2)
    assert [jwk["kid"] for jwk in rotated.public_jwks(later)["keys"]] == [rotated.active.kid]
    assert original.active.kid not in rotated.trusted_keys(later)


def test_rotation_survives_a_restart(tmp_path: Path) -> None:
    """A rotated set reloaded from disk has the same active key and retired keys."""
    original = load_or_create(tmp_path / "keys")
    rotated = original.rotate(grace=timedelta(hours=1), now=NOW)
    reloaded = load_or_create(tmp_path / "keys")
    assert reloaded.active.kid == rotated.active.kid
    assert [old.key.kid for old in reloaded.retired] == [original.active.kid]
    assert reloaded.retired[0].not_after == NOW + timedelta(hours=1)
    assert all(_mode(f) == 0o600 for f in (tmp_path / "keys").iterdir())


def test_rotation_forgets_keys_whose_grace_has_ended(tmp_path: Path) -> None:
    """Rotating again after a grace period ends deletes the expired key and its file."""
    first = load_or_create(tmp_path / "keys")
    second = first.rotate(grace=timedelta(minutes=5), now=NOW)
    third = second.rotate(grace=timedelta(minutes=5), now=NOW + timedelta(hours=1))
    assert [old.key.kid for old in third.retired] == [second.active.kid]
    assert not (tmp_path / "keys" / f"{first.active.kid}.pem").exists()


def test_load_signing_key_from_pem_and_from_jwk(tmp_path: Path) -> None:
    """One key loads identically from a PKCS#8 PEM file and from a private JWK file."""
    key = SigningKey.generate("EdDSA")
    pem = tmp_path / "key.pem"
    pem.write_bytes(key.private_pem())
    raw = key.private_key.private_bytes_raw()  # type: ignore[union-attr]
    jwk_file = tmp_path / "key.jwk"
    jwk_file.write_text(json.dumps({**key.public_jwk(), "d": b64url_encode(raw)}))
    assert load_signing_key(pem).kid == key.kid
    assert load_signing_key(jwk_file).kid == key.kid


def test_private_jwk_with_a_foreign_kid_is_refused() -> None:
    """A private JWK whose kid is not its thumbprint is refused rather than trusted by name."""
    key = Ed25519PrivateKey.generate()
    signing = SigningKey.from_private_key(key)
    jwk = {**signing.public_jwk(), "kid": "chosen", "d": b64url_encode(key.private_bytes_raw())}
    with pytest.raises(KeyMaterialError):
        signing_key_from_jwk(jwk)


def test_trusted_keys_from_jwks_and_single_jwk() -> None:
    """A JWK Set and a single JWK both load into pinned keys looked up by kid."""
    a, b = SigningKey.generate("EdDSA"), SigningKey.generate("ES256")
    trusted = TrustedKeys.from_json(json.dumps({"keys": [a.public_jwk(), b.public_jwk()]}))
    assert a.kid in trusted and b.kid in trusted and len(trusted) == 2
    single = TrustedKeys.from_json(a.public_jwk())
    found = single.get(a.kid)
    assert found is not None and found.alg == "EdDSA"


@pytest.mark.parametrize(
    ("mutation", "case"),
    [
        ({"kty": "oct", "k": "c2VjcmV0"}, "symmetric key"),
        ({"use": "enc"}, "use is not sig"),
        ({"key_ops": ["encrypt"]}, "key_ops without verify"),
        ({"key_ops": None}, "key_ops present but no array"),
        ({"alg": "ES256"}, "alg disagrees with the key type"),
        ({"kid": 7}, "kid not a string"),
        ({"kid": "../etc/passwd"}, "kid not a plain identifier"),
        ({"d": "AAAA"}, "private material"),
        ({"crv": "P-384"}, "curve outside the profile"),
        ({"x": "not base64!"}, "unreadable coordinate"),
    ],
)
def test_trusted_keys_refuse_jwks_outside_the_profile(
    mutation: dict[str, object], case: str
) -> None:
    """A JWK outside the signing profile is refused when loading trusted keys."""
    jwk = {**SigningKey.generate("EdDSA").public_jwk(), **mutation}
    with pytest.raises(KeyMaterialError):
        TrustedKeys.from_json({"keys": [jwk]})


def test_trusted_keys_refuse_duplicate_kids() -> None:
    """A JWK Set listing one kid twice is refused instead of letting order pick a key."""
    first = SigningKey.generate().public_jwk()
    second = {**first, "alg": "EdDSA"}  # the same key, so the same computed kid
    with pytest.raises(KeyMaterialError, match="duplicate"):
        TrustedKeys.from_json({"keys": [second, first]})


def test_trusted_keys_refuse_duplicate_json_members() -> None:
    """A JWK Set document with a repeated member name is refused before any key is read."""
    jwk = SigningKey.generate().public_jwk()
    text = json.dumps({"keys": [jwk]})[:-1] + ', "keys": []}'
    with pytest.raises(ValueError):
        TrustedKeys.from_json(text)


def test_expired_key_is_not_returned() -> None:
    """A pinned key past its not-after time is treated as absent."""
    key = SigningKey.generate().verification_key(not_after=NOW)
    trusted = TrustedKeys([key])
    assert trusted.get(key.kid, at=NOW - timedelta(seconds=1)) is key
    assert trusted.get(key.kid, at=NOW) is None
