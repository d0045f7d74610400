"""Signing keys for cards and delegation tokens, and the pinned keys that verify them.

Two algorithms exist here: ``EdDSA`` over Ed25519 (the default) and ``ES256`` over P-256.
Each key is bound to exactly one of them (RFC 8725 section 3.1), and its ``kid`` is its
RFC 7638 thumbprint, so the identifier follows from the public key and cannot be chosen.

* :class:`SigningKey` is one private key with its ``kid`` and algorithm.
* :class:`KeySet` is what a service signs with: the active key plus earlier keys that
  still verify until their ``not_after`` time. :func:`load_or_create` keeps it in a
  directory readable by the owner only, so a rotation survives a restart.
* :class:`TrustedKeys` is what a verifier trusts: ``kid`` to public key, loaded from a
  JWK or JWK Set that was pinned out of band. Nothing here fetches keys from a URL.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_cards.jwk import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    KEY_UNUSABLE,
    KID_NOT_THUMBPRINT,
    KID_PATTERN,
    Algorithm,
    KeyMaterialError,
    PrivateKey,
    PublicKey,
    algorithm_of,
    b64url_decode,
    b64url_encode,
    check_kid,
    coordinate,
    jwk_thumbprint,
    key_error,
    public_jwk_members,
    public_key_from_jwk,
    thumbprint_of,
)
from contracts import strict_json

MANIFEST_NAME = "keyset.json"


@dataclass(frozen=True)
class VerificationKey:
    """A public key pinned to one algorithm, valid for verification until ``not_after``.

    Its ``kid`` must be the key's RFC 7638 thumbprint; any other is refused on
    construction, so no path can pin a key under a label it chose.
    """

    kid: str
    alg: Algorithm
    public_key: PublicKey = field(repr=False)
    not_after: datetime | None = None

    def __post_init__(self) -> None:
        check_kid(self.kid, self.public_key)
        if algorithm_of(self.public_key) != self.alg:
            raise KeyMaterialError(f"a {algorithm_of(self.public_key)} key cannot be {self.alg}")

    def valid_at(self, at: datetime) -> bool:
        return self.not_after is None or at < self.not_after

    def to_jwk(self) -> dict[str, str]:
        return {
            **public_jwk_members(self.public_key),
            "kid": self.kid,
            "alg": self.alg,
            "use": "sig",
        }


@dataclass(frozen=True)
class SigningKey:
    """A private key with its thumbprint ``kid`` and its single algorithm."""

    kid: str
    alg: Algorithm
    private_key: PrivateKey = field(repr=False)

    def __post_init__(self) -> None:
        check_kid(self.kid, self.private_key.public_key())

    @classmethod
    def from_private_key(cls, private_key: PrivateKey) -> SigningKey:
        alg = algorithm_of(private_key)
        kid = thumbprint_of(private_key.public_key())
        return cls(kid=kid, alg=alg, private_key=private_key)

    @classmethod
    def generate(cls, alg: Algorithm = DEFAULT_ALGORITHM) -> SigningKey:
        if alg == "EdDSA":
            return cls.from_private_key(Ed25519PrivateKey.generate())
        if alg == "ES256":
            return cls.from_private_key(ec.generate_private_key(ec.SECP256R1()))
        raise KeyMaterialError(f"algorithm {alg!r} is not allowed")

    def verification_key(self, not_after: datetime | None = None) -> VerificationKey:
        return VerificationKey(self.kid, self.alg, self.private_key.public_key(), not_after)

    def public_jwk(self) -> dict[str, str]:
        return self.verification_key().to_jwk()

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


@dataclass(frozen=True)
class RetiredKey:
    """An earlier signing key kept so that what it signed still verifies until ``not_after``."""

    key: SigningKey
    not_after: datetime


# --- trusted keys ----------------------------------------------------------------------------


class TrustedKeys:
    """Pinned public keys by ``kid``: the only keys a verifier ever uses.

    Duplicate kids are refused outright, because "the first match wins" lets whoever
    controls the order of a JWK Set choose the key.
    """

    def __init__(self, keys: Iterable[VerificationKey] = ()) -> None:
        self._keys: dict[str, VerificationKey] = {}
        for key in keys:
            if not KID_PATTERN.fullmatch(key.kid):
                raise KeyMaterialError(f"kid {key.kid!r} is not a plain identifier")
            if key.kid in self._keys:
                raise KeyMaterialError(f"duplicate kid {key.kid!r}")
            self._keys[key.kid] = key

    @classmethod
    def from_json(cls, document: str | bytes | Mapping[str, Any]) -> TrustedKeys:
        """Load a JWK Set (``{"keys": [...]}``) or a single public JWK."""
        value = strict_json.loads(document) if isinstance(document, str | bytes) else document
        if not isinstance(value, Mapping):
            raise KeyMaterialError("a JWK or JWK Set must be a JSON object")
        if "keys" in value:
            keys = value["keys"]
            if not isinstance(keys, list) or not keys:
                raise KeyMaterialError("a JWK Set needs a non-empty 'keys' array")
            return cls(verification_key_from_jwk(jwk) for jwk in keys)
        return cls([verification_key_from_jwk(value)])

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TrustedKeys:
        return cls.from_json(Path(path).read_bytes())

    def get(self, kid: str, *, at: datetime | None = None) -> VerificationKey | None:
        """The key for ``kid`` if it is pinned and, when ``at`` is given, not yet expired."""
        key = self._keys.get(kid)
        if key is None or (at is not None and not key.valid_at(at)):
            return None
        return key

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __iter__(self) -> Iterator[VerificationKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"TrustedKeys({sorted(self._keys)!r})"

    def to_jwks(self) -> dict[str, list[dict[str, str]]]:
        return {"keys": [key.to_jwk() for key in self._keys.values()]}


def verification_key_from_jwk(jwk: Any) -> VerificationKey:
    """One pinned public key from a JWK, refusing anything outside the signing profile."""
    if not isinstance(jwk, Mapping):
        raise KeyMaterialError("a JWK must be a JSON object")
    kty = jwk.get("kty")
    if kty == "oct":
        raise KeyMaterialError("symmetric (kty oct) keys are never trusted")
    if "d" in jwk:
        raise KeyMaterialError("a trusted key must be public; this JWK holds private material")
    if "use" in jwk and jwk["use"] != "sig":
        raise KeyMaterialError(f"key use {jwk['use']!r} is not 'sig'")
    key_ops = jwk.get("key_ops")
    if key_ops is not None and (not isinstance(key_ops, list) or "verify" not in key_ops):
        raise KeyMaterialError("key_ops does not allow 'verify'")
    kid = jwk.get("kid")
    if "kid" in jwk and (not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid)):
        raise KeyMaterialError("a JWK's kid must be a plain string")
    public_key = public_key_from_jwk(jwk)
    alg = algorithm_of(public_key)
    if "alg" in jwk and jwk["alg"] != alg:
        raise KeyMaterialError(f"JWK alg {jwk['alg']!r} does not match its key type ({alg})")
    return VerificationKey(kid=check_kid(kid, public_key), alg=alg, public_key=public_key)


# --- loading one signing key -----------------------------------------------------------------


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """Load a private key from a PEM (PKCS#8 or SEC1) file or a private JWK file."""
    data = Path(path).read_bytes()
    if data.lstrip().startswith(b"-----BEGIN"):
        return signing_key_from_pem(data)
    try:
        jwk = strict_json.loads(data)
    except strict_json.StrictJSONError as exc:
        raise KeyMaterialError(f"{path} is neither PEM nor a JSON JWK") from exc
    return signing_key_from_jwk(jwk)


def signing_key_from_pem(data: bytes) -> SigningKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise key_error(exc) from None
    if not isinstance(key, Ed25519PrivateKey | ec.EllipticCurvePrivateKey):
        raise KeyMaterialError(f"{type(key).__name__} is not allowed; use Ed25519 or P-256")
    return SigningKey.from_private_key(key)


def signing_key_from_jwk(jwk: Any) -> SigningKey:
    """A signing key from a private JWK (``d`` present); a ``kid`` in it must be the thumbprint."""
    if not isinstance(jwk, Mapping) or not isinstance(jwk.get("d"), str):
        raise KeyMaterialError("a private JWK needs a 'd' member")
    public = verification_key_from_jwk(
        {name: value for name, value in jwk.items() if name not in ("d", "kid")}
    )
    try:
        private: PrivateKey
        if public.alg == "EdDSA":
            private = Ed25519PrivateKey.from_private_bytes(b64url_decode(jwk["d"]))
        else:
            scalar = int.from_bytes(coordinate(jwk, "d"), "big")
            private = ec.derive_private_key(scalar, ec.SECP256R1())
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise key_error(exc) from None
    key = SigningKey.from_private_key(private)
    if public_jwk_members(private.public_key()) != public_jwk_members(public.public_key):
        raise KeyMaterialError("the private JWK's public members do not match its 'd'")
    check_kid(jwk.get("kid"), private.public_key())
    return key


# --- key sets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySet:
    """The active signing key and earlier keys that still verify until they expire.

    ``directory`` is where the set is persisted; :meth:`rotate` writes the new set there
    before returning it, so a restart continues with the rotated keys.
    """

    active: SigningKey
    retired: tuple[RetiredKey, ...] = ()
    directory: Path | None = None

    def verification_keys(self, now: datetime | None = None) -> list[VerificationKey]:
        at = now or datetime.now(UTC)
        keys = [self.active.verification_key()]
        keys += [old.key.verification_key(old.not_after) for old in self.retired]
        return [key for key in keys if key.valid_at(at)]

    def trusted_keys(self, now: datetime | None = None) -> TrustedKeys:
        return TrustedKeys(self.verification_keys(now))

    def public_jwks(self, now: datetime | None = None) -> dict[str, list[dict[str, str]]]:
        """``{"keys": [...]}`` with the active key first, then unexpired earlier keys."""
        return {"keys": [key.to_jwk() for key in self.verification_keys(now)]}

    def rotate(
        self,
        *,
        grace: timedelta,
        now: datetime | None = None,
        alg: Algorithm | None = None,
    ) -> KeySet:
        """A set with a fresh active key; the current one verifies for ``grace`` more."""
        at = now or datetime.now(UTC)
        kept = tuple(old for old in self.retired if at < old.not_after)
        rotated = replace(
            self,
            active=SigningKey.generate(alg or self.active.alg),
            retired=(RetiredKey(self.active, at + grace), *kept),
        )
        if self.directory is not None:
            save_key_set(rotated, self.directory)
        return rotated


def load_or_create(
    directory: str | os.PathLike[str], *, alg: Algorithm = DEFAULT_ALGORITHM
) -> KeySet:
    """The key set kept in ``directory``, generating and saving one on first use."""
    path = Path(directory)
    if (path / MANIFEST_NAME).exists():
        return load_key_set(path)
    key_set = KeySet(active=SigningKey.generate(alg), directory=path)
    save_key_set(key_set, path)
    return key_set


def load_key_set(directory: str | os.PathLike[str]) -> KeySet:
    path = Path(directory)
    manifest = strict_json.loads((path / MANIFEST_NAME).read_bytes())
    if not isinstance(manifest, dict) or not isinstance(manifest.get("keys"), list):
        raise KeyMaterialError(f"{MANIFEST_NAME} is not a key set manifest")
    active: SigningKey | None = None
    retired: list[RetiredKey] = []
    for entry in manifest["keys"]:
        key = signing_key_from_pem((path / f"{_checked_kid(entry)}.pem").read_bytes())
        if key.kid != entry["kid"]:
            raise KeyMaterialError(f"key file for {entry['kid']} holds another key")
        if entry.get("not_after") is None:
            if active is not None:
                raise KeyMaterialError("a key set has exactly one active key")
            active = key
        else:
            retired.append(RetiredKey(key, datetime.fromisoformat(entry["not_after"])))
    if active is None:
        raise KeyMaterialError("the key set has no active key")
    return KeySet(active=active, retired=tuple(retired), directory=path)


def save_key_set(key_set: KeySet, directory: str | os.PathLike[str]) -> None:
    """Write every key as an owner-only PEM file, then the manifest that names them."""
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    entries: list[dict[str, str | None]] = [{"kid": key_set.active.kid, "not_after": None}]
    _write_private(path / f"{key_set.active.kid}.pem", key_set.active.private_pem())
    for old in key_set.retired:
        _write_private(path / f"{old.key.kid}.pem", old.key.private_pem())
        entries.append({"kid": old.key.kid, "not_after": old.not_after.isoformat()})
    _write_private(path / MANIFEST_NAME, strict_json.dumps({"keys": entries}))
    _remove_stale_pem_files(path, {str(entry["kid"]) for entry in entries})


def _checked_kid(entry: Any) -> str:
    kid = entry.get("kid") if isinstance(entry, dict) else None
    if not isinstance(kid, str) or not KID_PATTERN.fullmatch(kid) or kid.startswith("."):
        raise KeyMaterialError("a key set manifest entry needs a plain kid")
    return kid


def _write_private(target: Path, data: bytes) -> None:
    """Write ``data`` to a new 0600 file next to ``target``, then move it into place."""
    temporary = target.with_name(f".{target.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)


def _remove_stale_pem_files(path: Path, kids: set[str]) -> None:
    for pem in path.glob("*.pem"):
        if pem.stem not in kids:
            pem.unlink()


__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "KEY_UNUSABLE",
    "KID_NOT_THUMBPRINT",
    "KID_PATTERN",
    "Algorithm",
    "KeyMaterialError",
    "KeySet",
    "PrivateKey",
    "PublicKey",
    "RetiredKey",
    "SigningKey",
    "TrustedKeys",
    "VerificationKey",
    "algorithm_of",
    "b64url_decode",
    "b64url_encode",
    "check_kid",
    "jwk_thumbprint",
    "load_key_set",
    "load_or_create",
    "load_signing_key",
    "public_jwk_members",
    "save_key_set",
    "signing_key_from_jwk",
    "signing_key_from_pem",
    "thumbprint_of",
    "verification_key_from_jwk",
]
