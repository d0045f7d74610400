"""How one guard is configured: the kit's settings, plus the upstream and its skills' scopes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from member_kit.settings import MemberSettings

# RFC 6749 section 3.3: a scope token is one or more of these characters.
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


@dataclass(frozen=True)
class GuardSettings(MemberSettings):
    """``upstream_url`` is the base URL of the agent guarded (its card is under it);
    ``skill_scopes`` the scope each of its skills asks of a delegation token. Replies of
    the upstream are read up to ``upstream_max_bytes``, each call within
    ``upstream_timeout_seconds``, over at most ``upstream_connections`` connections.
    ``member_name`` is what the guarded agent reports under (``guard_*`` metrics, the
    ``guard.access`` logger, ``GUARD_*`` variables: :mod:`member_kit.telemetry.names`);
    an a2a-sdk agent run by :func:`member_kit.sdk.serve_member` reports under its name."""

    upstream_url: str = "http://127.0.0.1:9000"
    skill_scopes: Mapping[str, str] = field(default_factory=dict)
    upstream_max_bytes: int = 1_000_000
    upstream_timeout_seconds: float = 30.0
    upstream_connections: int = 20
    member_name: str = "guard"

    def __post_init__(self) -> None:
        super().__post_init__()
        parts = urlsplit(self.upstream_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the upstream must be an http(s) URL, not {self.upstream_url!r}")
        if self.upstream_max_bytes < 1 or self.upstream_connections < 1:
            raise ValueError("upstream_max_bytes and upstream_connections must be at least 1")
        if self.upstream_timeout_seconds <= 0:
            raise ValueError("upstream_timeout_seconds must be positive")


def parse_skill_scopes(entries: Iterable[str]) -> dict[str, str]:
    """``SKILL=SCOPE`` entries as a mapping; a skill named twice or a scope that is not
    one RFC 6749 scope token is a ``ValueError``."""
    scopes: dict[str, str] = {}
    for entry in entries:
        skill, separator, scope = entry.partition("=")
        if not separator or not skill or not _SCOPE.fullmatch(scope):
            raise ValueError(f"--skill-scope {entry!r} is not SKILL=SCOPE (one scope token)")
        if skill in scopes:
            raise ValueError(f"--skill-scope names skill {skill!r} twice")
        scopes[skill] = scope
    return scopes
