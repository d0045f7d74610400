"""How one member service instance is configured (the kit's part; a member may add its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from agent_cards.edge.limits import EdgeLimits
from agent_cards.identity import identities_of, identity_of
from agent_cards.keys import KeySet, TrustedKeys
from member_kit.tasks.leases import DEFAULT_LEASE_SECONDS, MIN_LEASE_SECONDS
from member_kit.tasks.retention import DEFAULT_RETENTION

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"


@dataclass(frozen=True)
class MemberSettings:
    """Configuration for :func:`member_kit.server.app.create_app`.

    ``public_base_url`` is where callers reach this service; the Agent Card advertises the
    JSON-RPC interface under it. ``skill_delay_seconds`` holds each task in WORKING for that
    long before the skill runs, to exercise cancellation and timeouts; it is 0 normally.
    With ``record_requests`` the app keeps the last ``recorded_requests_limit`` raw request
    bodies in ``app.state.received_bodies`` so tests can see exactly which bytes arrived.

    Trust: ``trusted_issuers`` maps each issuer whose delegation tokens are accepted to its
    pinned keys; with none, :func:`~member_kit.server.app.create_app` serves anonymously and
    :func:`~member_kit.server.app.serve` refuses to start unless ``insecure_anonymous`` is set.
    ``signing_keys`` sign the card and are published as the JWK Set (an in-memory key is
    generated when absent). The last ``decision_log_limit`` authorization decisions are
    kept in ``app.state.decisions``.

    Storage: with ``database_url`` (PostgreSQL or SQLite) or ``data_dir`` (the member's
    SQLite file in it, named after the member: ``remote-risk.db`` for remote_risk) tasks and
    the record of used tokens are kept in that database and survive a restart; with neither
    they live in memory. The process working an unfinished task holds a lease of
    ``task_lease_seconds`` on it, renewed while it works; when the lease runs out (the
    process died) another replica, or this service started again, resumes the task (see
    :mod:`member_kit.tasks.leases`). An idempotency key is remembered for
    ``idempotency_retention_seconds`` after its first use, whether or not its task is still
    stored, and refused as expired after that (:mod:`member_kit.tasks.retention`).

    Push notifications: a webhook may be at a public address (unless
    ``push_allow_public`` is off) or inside one of ``push_allowed_networks`` (CIDR
    strings); loopback and private ranges only when listed there. Each notification is
    tried ``push_attempts`` times, the waits doubling from ``push_first_backoff_seconds``.
    """

    public_base_url: str = "http://127.0.0.1:8000"
    task_capacity: int = 1000
    max_body_bytes: int = 1_000_000
    card_max_age_seconds: int = 300
    skill_delay_seconds: float = 0.0
    record_requests: bool = False
    recorded_requests_limit: int = 100
    trusted_issuers: Mapping[str, TrustedKeys] = field(default_factory=dict, repr=False)
    signing_keys: KeySet | None = field(default=None, repr=False)
    insecure_anonymous: bool = False
    decision_log_limit: int = 1000
    data_dir: Path | None = None
    database_url: str | None = field(default=None, repr=False)
    task_lease_seconds: float = DEFAULT_LEASE_SECONDS
    idempotency_retention_seconds: int = int(DEFAULT_RETENTION.total_seconds())
    push_allowed_networks: tuple[str, ...] = ()
    push_allow_public: bool = True
    push_attempts: int = 4
    push_first_backoff_seconds: float = 0.2
    # The HTTP edge's limits; None: the defaults, with max_body_bytes from above.
    edge: EdgeLimits | None = field(default=None, repr=False)
    # The gRPC binding's port (same process, its own port) and host; None: not served.
    grpc_port: int | None = None
    grpc_host: str = "127.0.0.1"
    # The bearer token GET /metrics asks for; None: /metrics is not served (404).
    metrics_token: str | None = field(default=None, repr=False)
    # Refuse a send whose token binds no request digest (request_digest_missing); a token
    # that binds one is always held to it.
    require_request_digest: bool = False
    # The bearer token the audit routes (GET /audit/...) ask for; None: not served (404).
    audit_token: str | None = field(default=None, repr=False)
    # The run owner's token-exchange endpoint (its /token-exchange): with it, a skill
    # working a task may sub-delegate from the task's token (member_kit.trust.chain).
    exchange_url: str | None = None
    # How often the status lists the accepted tokens name are fetched (the fallback when
    # a revocation push is lost); see member_kit.server.revocations.
    revocation_poll_seconds: float = 30.0

    @property
    def edge_limits(self) -> EdgeLimits:
        return self.edge or EdgeLimits(max_body_bytes=self.max_body_bytes)

    @property
    def jsonrpc_url(self) -> str:
        """Where the card says the JSON-RPC interface is (an address, not an identity)."""
        return self.public_base_url.rstrip("/") + JSONRPC_PATH

    @property
    def agent_id(self) -> str:
        """This service's identity, the ``iss`` of what it signs: the RFC 9278 thumbprint
        URI of its active card-signing key (:mod:`agent_cards.identity`)."""
        return identity_of(self._keys().active.verification_key())

    def audiences(self, now: datetime | None = None) -> frozenset[str]:
        """Every ``aud`` a token for this service may name: the thumbprint URI of each of
        its own card-signing keys it publishes at ``now`` (active, published, and earlier
        keys until they expire), derived from the keys here, never from a document."""
        return identities_of(self._keys().verification_keys(now))

    def _keys(self) -> KeySet:
        if self.signing_keys is None:
            raise ValueError("no signing keys: create_app gives the settings their keys")
        return self.signing_keys

    def __post_init__(self) -> None:
        parts = urlsplit(self.public_base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"public_base_url must be an http(s) URL, not {self.public_base_url!r}"
            )
        for name in (
            "task_capacity",
            "max_body_bytes",
            "recorded_requests_limit",
            "decision_log_limit",
            "push_attempts",
            "idempotency_retention_seconds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.task_lease_seconds < MIN_LEASE_SECONDS:
            raise ValueError(f"task_lease_seconds must be at least {MIN_LEASE_SECONDS}")
        if self.revocation_poll_seconds <= 0:
            raise ValueError("revocation_poll_seconds must be positive")
        if self.card_max_age_seconds < 0 or self.skill_delay_seconds < 0:
            raise ValueError("card_max_age_seconds and skill_delay_seconds cannot be negative")
