"""Signing keys for cards and delegation tokens, and the pinned keys that verify them.

Two algorithms exist here: ``EdDSA`` over Ed25519 (the default) and ``ES256`` over P-256.
Each key is bound to exactly one of them (RFC 8725 section 3.1), and its ``kid`` is its
RFC 7638 thumbprint, so the identifier follows from the public key and cannot be chosen.

* :class:`SigningKey` is one private key with its ``kid`` and algorithm.
* :class:`KeySet` is what a service signs with: the active key plus earlier keys that
  still verify until their ``not_after`` time, and at most one *published* key that is
  not used yet (:meth:`KeySet.publish`): it is in the JWK Set at once, so verifiers can
  fetch it, and becomes the active key at its ``activates_at`` time or when
  :meth:`KeySet.activate` is called, whichever comes first. :func:`load_or_create` keeps
  the set in a directory readable by the owner only, so a rotation survives a restart.
* :class:`TrustedKeys` is what a verifier trusts: ``kid`` to public key, loaded from a
  JWK or JWK Set that was pinned out of band. Nothing here fetches keys from a URL.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
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
    thumbprint_of,
)
from agent_cards.trusted import TrustedKeys, VerificationKey, verification_key_from_jwk
from contracts import strict_json

MANIFEST_NAME = "keyset.json"


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
        if not_after is None:
            return self._verification_key
        return VerificationKey(self.kid, self.alg, self._verification_key.public_key, not_after)

    @cached_property
    def _verification_key(self) -> VerificationKey:
        """Derived once: a receipt asks for it several times (its issuer, its key)."""
        return VerificationKey(self.kid, self.alg, self.private_key.public_key())

    @cached_property
    def ed25519_secret(self) -> bytes:
        """libsodium's 64-byte secret key (seed, then public key), derived once: an Ed25519
        key signs with it (:mod:`agent_cards.signatures`); empty for any other key."""
        if not isinstance(self.private_key, Ed25519PrivateKey):
            return b""
        seed = self.private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return seed + self._verification_key.ed25519_public

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
class PublishedKey:
    """A key in the JWK Set that signs nothing yet: it becomes active at ``activates_at``
    (``None``: only when activated explicitly), and the key it replaces then keeps
    verifying for ``grace``."""

    key: SigningKey
    activates_at: datetime | None
    grace: timedelta


@dataclass(frozen=True)
class KeySet:
    """The active signing key, earlier keys that still verify until they expire, and at
    most one published key waiting to become active.

    ``directory`` is where the set is persisted; :meth:`rotate`, :meth:`publish` and
    :meth:`activate` write the new set there before returning it, so a restart continues
    with it. Every reading method follows the schedule: once a published key's
    ``activates_at`` has passed, it is the active key (:meth:`effective`), in memory as
    on disk, so a long-running process switches on time without a reload.
    """

    active: SigningKey
    retired: tuple[RetiredKey, ...] = ()
    directory: Path | None = None
    published: PublishedKey | None = None

    def effective(self, now: datetime | None = None) -> KeySet:
        """This set as it is at ``now``: a published key whose time has come is active."""
        waiting = self.published
        at = now or datetime.now(UTC)
        if waiting is None or waiting.activates_at is None or at < waiting.activates_at:
            return self
        return self._activated(waiting.activates_at)

    def signing_key(self, now: datetime | None = None) -> SigningKey:
        """The key to sign with at ``now``."""
        return self.effective(now).active

    def verification_keys(self, now: datetime | None = None) -> list[VerificationKey]:
        """The active key, the published key, then earlier keys not yet expired."""
        at = now or datetime.now(UTC)
        current = self.effective(at)
        keys = [current.active.verification_key()]
        if current.published is not None:
            keys.append(current.published.key.verification_key())
        keys += [old.key.verification_key(old.not_after) for old in current.retired]
        return [key for key in keys if key.valid_at(at)]

    def publish(
        self,
        *,
        grace: timedelta,
        delay: timedelta | None,
        now: datetime | None = None,
        alg: Algorithm | None = None,
    ) -> KeySet:
        """A set with a new key published now and active after ``delay`` (``None``: when
        :meth:`activate` is called); the current key then verifies for ``grace`` more."""
        at = now or datetime.now(UTC)
        current = self.effective(at)
        if current.published is not None:
            raise KeyMaterialError(
                f"key {current.published.key.kid} is already published and not active yet; "
                "activate it first"
            )
        activates_at = None if delay is None else at + delay
        key = SigningKey.generate(alg or current.active.alg)
        return current._saved(replace(current, published=PublishedKey(key, activates_at, grace)))

    def activate(self, now: datetime | None = None) -> KeySet:
        """The published key active from ``now``; refused when none is published."""
        at = now or datetime.now(UTC)
        current = self.effective(at)
        if current.published is None:
            raise KeyMaterialError("no key is published; publish one first")
        return current._saved(current._activated(at))

    def _activated(self, at: datetime) -> KeySet:
        assert self.published is not None
        kept = tuple(old for old in self.retired if at < old.not_after)
        old = RetiredKey(self.active, at + self.published.grace)
        return replace(self, active=self.published.key, retired=(old, *kept), published=None)

    def _saved(self, key_set: KeySet) -> KeySet:
        if self.directory is not None:
            save_key_set(key_set, self.directory)
        return key_set

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
        """A set with a fresh key active at once (published and activated in one step);
        the current one verifies for ``grace`` more."""
        at = now or datetime.now(UTC)
        return self.publish(grace=grace, delay=None, now=at, alg=alg).activate(at)


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
    published: PublishedKey | None = None
    for entry in manifest["keys"]:
        key = signing_key_from_pem((path / f"{_checked_kid(entry)}.pem").read_bytes())
        if key.kid != entry["kid"]:
            raise KeyMaterialError(f"key file for {entry['kid']} holds another key")
        if entry.get("published"):
            if published is not None:
                raise KeyMaterialError("a key set has at most one published key")
            published = _published_entry(key, entry)
        elif entry.get("not_after") is None:
            if active is not None:
                raise KeyMaterialError("a key set has exactly one active key")
            active = key
        else:
            retired.append(RetiredKey(key, datetime.fromisoformat(entry["not_after"])))
    if active is None:
        raise KeyMaterialError("the key set has no active key")
    return KeySet(active=active, retired=tuple(retired), directory=path, published=published)


def _published_entry(key: SigningKey, entry: dict[str, Any]) -> PublishedKey:
    activates_at = entry.get("activates_at")
    when = None if activates_at is None else datetime.fromisoformat(activates_at)
    return PublishedKey(key, when, timedelta(seconds=int(entry["grace_seconds"])))


def save_key_set(key_set: KeySet, directory: str | os.PathLike[str]) -> None:
    """Write every key as an owner-only PEM file, then the manifest that names them."""
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    entries: list[dict[str, Any]] = [{"kid": key_set.active.kid, "not_after": None}]
    _write_private(path / f"{key_set.active.kid}.pem", key_set.active.private_pem())
    waiting = key_set.published
    if waiting is not None:
        _write_private(path / f"{waiting.key.kid}.pem", waiting.key.private_pem())
        when = None if waiting.activates_at is None else waiting.activates_at.isoformat()
        grace = int(waiting.grace.total_seconds())
        entries.append(
            {
                "kid": waiting.key.kid,
                "published": True,
                "activates_at": when,
                "grace_seconds": grace,
            }
        )
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
    "PublishedKey",
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
