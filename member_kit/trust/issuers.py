"""Where the risk service's keys and trusted issuers come from, read once at start.

* Trusted issuers: ``ISSUER=SOURCE`` entries, from ``--trust-issuer`` (repeatable) or, when
  no flag is given, from ``REMOTE_RISK_TRUST_ISSUERS`` (entries separated by whitespace or
  commas). The issuer is everything before the first ``=``. A source starting with
  ``https://`` or ``http://`` is fetched at start with httpx (timeout, no redirects, size
  cap) and again later as :mod:`member_kit.trust.refresh` says (an unknown kid, an
  expired cache); anything else is a file path, read once. Either holds a JWK Set or a
  single public JWK.
* Own keys: ``--key-file FILE`` (PEM or private JWK) loads one signing key; otherwise the
  key set kept in ``DATA_DIR/keys`` is loaded or created. ``DATA_DIR`` is ``--data-dir``,
  else ``REMOTE_RISK_DATA_DIR``, else ``$XDG_DATA_HOME/a2a-federation/remote-risk``
  (``~/.local/share/...`` when ``XDG_DATA_HOME`` is unset).

Every failure is a :class:`TrustConfigError` with a one-line message for the operator.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import httpx

from agent_cards import tls
from agent_cards.keys import KeyMaterialError, KeySet, TrustedKeys, load_or_create, load_signing_key
from contracts.grant import IDENTIFIER_PATTERN
from contracts.strict_json import StrictJSONError
from member_kit.errors import MemberError
from member_kit.trust.refresh import (
    DEFAULT_MIN_INTERVAL_SECONDS,
    MIN_REFRESH_ENV_VAR,
    IssuerDirectory,
    IssuerSource,
    fresh_for,
)

TRUST_ENV_VAR = "REMOTE_RISK_TRUST_ISSUERS"
DATA_DIR_ENV_VAR = "REMOTE_RISK_DATA_DIR"
APP_NAME = "a2a-federation"
SERVICE_DIR = "remote-risk"
KEYS_DIR = "keys"
FETCH_TIMEOUT_SECONDS = 5.0
MAX_JWKS_BYTES = 64 * 1024
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_URL_PREFIXES = ("https://", "http://")


class TrustConfigError(MemberError, ValueError):
    """The trust or key configuration cannot be used; the service must not start.

    ``reason`` is ``kid_not_thumbprint`` when a JWK's stated kid is not its computed
    RFC 7638 thumbprint, ``key_unusable`` for other refused key material, else
    ``trust_config_invalid``."""

    def __init__(self, message: str, reason: str = "trust_config_invalid") -> None:
        super().__init__(message if reason == "trust_config_invalid" else f"{reason}: {message}")
        self.reason = reason


def issuer_entries(flags: Iterable[str] | None, environ: Mapping[str, str]) -> list[str]:
    """The ``ISSUER=SOURCE`` entries in force: the flags if any, else the environment."""
    given = list(flags or [])
    if given:
        return given
    return [entry for entry in re.split(r"[\s,]+", environ.get(TRUST_ENV_VAR, "")) if entry]


def parse_entry(entry: str) -> tuple[str, str]:
    """``ISSUER=SOURCE`` split at the first ``=``; the issuer must be a plain identifier."""
    issuer, separator, source = entry.partition("=")
    if not separator or not source:
        raise TrustConfigError(f"trusted issuer {entry!r} is not ISSUER=JWKS_FILE_OR_URL")
    if not _IDENTIFIER.fullmatch(issuer):
        raise TrustConfigError(f"trusted issuer {issuer!r} is not a plain identifier")
    return issuer, source


def min_refresh_seconds(environ: Mapping[str, str], variable: str = MIN_REFRESH_ENV_VAR) -> float:
    """``variable`` (remote_risk's ``REMOTE_RISK_JWKS_MIN_REFRESH_SECONDS`` unless a
    member names its own), else the default (10)."""
    text = environ.get(variable, "").strip()
    try:
        value = float(text) if text else DEFAULT_MIN_INTERVAL_SECONDS
    except ValueError:
        raise TrustConfigError(f"{variable}={text!r} is not a number") from None
    if value < 0:
        raise TrustConfigError(f"{variable} cannot be negative")
    return value


def load_trusted_issuers(
    entries: Iterable[str], *, min_interval: float = DEFAULT_MIN_INTERVAL_SECONDS
) -> IssuerDirectory:
    """Each issuer's pinned keys; an issuer named twice is refused as ambiguous. Issuers
    given by URL are refreshed later, at most once per ``min_interval`` seconds."""
    sources: dict[str, IssuerSource] = {}
    for entry in entries:
        issuer, source = parse_entry(entry)
        if issuer in sources:
            raise TrustConfigError(f"trusted issuer {issuer!r} is configured twice")
        sources[issuer] = _source(issuer, source, min_interval)
    return IssuerDirectory(sources, min_interval=min_interval)


def _source(issuer: str, source: str, min_interval: float) -> IssuerSource:
    if not source.startswith(_URL_PREFIXES):
        return IssuerSource(load_keys(issuer, source))
    body, headers = fetch_jwks_response(source)
    now = time.monotonic()
    etag = next((v for k, v in headers.items() if k.lower() == "etag"), None)
    return IssuerSource(
        _parsed(issuer, source, body),
        url=source,
        fetched_at=now,
        fresh_until=now + fresh_for(headers, min_interval),
        etag=etag,
        last_attempt=now,
    )


def load_keys(issuer: str, source: str) -> TrustedKeys:
    """The keys at ``source`` (a URL fetched now, or a file)."""
    document = fetch_jwks(source) if source.startswith(_URL_PREFIXES) else _read(source)
    return _parsed(issuer, source, document)


def _parsed(issuer: str, source: str, document: bytes) -> TrustedKeys:
    try:
        return TrustedKeys.from_json(document)
    except KeyMaterialError as exc:
        raise TrustConfigError(
            f"keys of issuer {issuer!r} from {source}: {exc}", exc.reason
        ) from None
    except StrictJSONError as exc:
        raise TrustConfigError(f"keys of issuer {issuer!r} from {source}: {exc}") from None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JWKS_BYTES + 1)
    except OSError as exc:
        raise TrustConfigError(f"cannot read JWK Set {path}: {exc.strerror}") from None
    if len(data) > MAX_JWKS_BYTES:
        raise TrustConfigError(f"JWK Set {path} is larger than {MAX_JWKS_BYTES} bytes")
    return data


def fetch_jwks(url: str, *, transport: httpx.BaseTransport | None = None) -> bytes:
    """The body at ``url``: status 200, no redirect followed, at most ``MAX_JWKS_BYTES``."""
    return fetch_jwks_response(url, transport=transport)[0]


def fetch_jwks_response(
    url: str, *, transport: httpx.BaseTransport | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers at ``url`` (see :func:`fetch_jwks`)."""
    try:
        with (
            httpx.Client(
                timeout=FETCH_TIMEOUT_SECONDS,
                follow_redirects=False,
                verify=tls.verified(True),
                transport=transport,
            ) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise TrustConfigError(f"JWK Set {url} answered HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise TrustConfigError(f"JWK Set {url} is larger than {MAX_JWKS_BYTES} bytes")
            return bytes(body), dict(response.headers)
    except httpx.HTTPError as exc:
        raise TrustConfigError(f"cannot fetch JWK Set {url}: {type(exc).__name__}") from None


def data_dir(option: str | None, environ: Mapping[str, str]) -> Path:
    """``--data-dir``, else ``REMOTE_RISK_DATA_DIR``, else the XDG user data directory."""
    if option:
        return Path(option).expanduser()
    if environ.get(DATA_DIR_ENV_VAR):
        return Path(environ[DATA_DIR_ENV_VAR]).expanduser()
    xdg = environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / APP_NAME / SERVICE_DIR


def signing_keys(key_file: str | None, directory: Path) -> KeySet:
    """One key from ``key_file``, else the key set in ``directory/keys`` (created if new)."""
    try:
        if key_file:
            return KeySet(active=load_signing_key(key_file))
        return load_or_create(directory / KEYS_DIR)
    except OSError as exc:
        where = key_file or str(directory / KEYS_DIR)
        raise TrustConfigError(f"cannot use the signing keys at {where}: {exc.strerror}") from None
    except (KeyMaterialError, StrictJSONError, ValueError) as exc:
        raise TrustConfigError(f"unusable signing key: {exc}") from None
