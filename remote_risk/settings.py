"""How one risk service instance is configured."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from coordinator.model_gateway import ModelConfig


@dataclass(frozen=True)
class Settings:
    """Configuration for :func:`remote_risk.app.create_app`.

    ``public_base_url`` is where callers reach this service; the Agent Card advertises the
    JSON-RPC interface under it. ``skill_delay_seconds`` holds each task in WORKING for that
    long before the skill runs, to exercise cancellation and timeouts; it is 0 normally.
    With ``record_requests`` the app keeps the last ``recorded_requests_limit`` raw request
    bodies in ``app.state.received_bodies`` so tests can see exactly which bytes arrived.
    """

    public_base_url: str = "http://127.0.0.1:8000"
    task_capacity: int = 1000
    max_body_bytes: int = 1_000_000
    card_max_age_seconds: int = 300
    skill_delay_seconds: float = 0.0
    record_requests: bool = False
    recorded_requests_limit: int = 100
    # With a model, the risk policy is interpreted by it and checked against the records
    # (remote_risk.model_skill); read it with remote_risk.model_skill.model_config_from_env.
    model: ModelConfig | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.public_base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"public_base_url must be an http(s) URL, not {self.public_base_url!r}"
            )
        for name in ("task_capacity", "max_body_bytes", "recorded_requests_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.card_max_age_seconds < 0 or self.skill_delay_seconds < 0:
            raise ValueError("card_max_age_seconds and skill_delay_seconds cannot be negative")
