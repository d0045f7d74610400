"""The request and answer documents of the coordinator's HTTP API.

Requests are strict: no coercion (``"30"`` is not a number, ``1`` is not ``true``) and no
fields beyond those named here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.grant import Identifier

MAX_TIMEOUT_SECONDS = 3600.0


class StrictRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class RegisterRequest(StrictRequest):
    """``federation register``: one of ``trust_key``, ``expect_kid`` or ``trust_on_first_use``
    says which keys may sign the card."""

    url: str = Field(min_length=1, max_length=2048, description="base URL or agent-card URL")
    name: str | None = Field(default=None, min_length=1, max_length=128)
    skill: str | None = Field(default=None, min_length=1, max_length=256)
    trust_key: dict[str, Any] | None = Field(default=None, description="a public JWK or JWK Set")
    expect_kid: str | None = Field(default=None, min_length=1, max_length=256)
    trust_on_first_use: bool = False
    approve: bool = False
    return_schemas: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per skill: a JSON Schema (Draft 2020-12) for returns"
    )
    return_finding: list[str] = Field(
        default_factory=list, description="skills that answer with one Finding (our contract)"
    )

    @model_validator(mode="after")
    def one_anchor(self) -> RegisterRequest:
        given = [self.trust_key is not None, self.expect_kid is not None, self.trust_on_first_use]
        if sum(given) > 1:
            raise ValueError("give at most one of trust_key, expect_kid, trust_on_first_use")
        return self


class DelegationRequest(StrictRequest):
    """``federation delegate``: one handoff to a registered agent."""

    to: str = Field(min_length=1, max_length=128, description="the registered agent's name")
    skill: str = Field(min_length=1, max_length=256)
    input: dict[str, Any]
    timeout: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_SECONDS)
    cancel_after: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS)
    principal: Identifier = "operator"
    tenant: Identifier = "default"
    wait: bool = Field(default=True, description="drive it here and answer the run document")
    return_schema: dict[str, Any] | None = Field(
        default=None, description="a JSON Schema (Draft 2020-12) the return must match"
    )

    @model_validator(mode="after")
    def cancel_needs_wait(self) -> DelegationRequest:
        if self.cancel_after is not None and not self.wait:
            raise ValueError("cancel_after needs wait: true")
        return self


class VerifyRequest(StrictRequest):
    bundle: dict[str, Any] | None = Field(default=None, description="an exported run bundle")


class AgentView(BaseModel):
    name: str
    endpoint: str
    card_url: str
    skills: list[str]
    trust: str
    verified_kid: str | None
    registered_at: str
    pending_approval: bool


class RegistrationView(BaseModel):
    status: str
    agent: AgentView


class Submitted(BaseModel):
    run_id: str
    attempt_id: str
    state: str


class RunSummary(BaseModel):
    """One line of ``federation runs``: derived from the run's document alone."""

    run_id: str
    kind: str | None
    owner: str | None
    state: str = Field(description="live, cancelled, empty, or the state the last branch ended in")
    started_at: str = Field(description="ISO 8601 UTC")
    targets: list[str]
    reason: str | None
    branches: int
    live_branches: int
    cancelled: bool


class RunList(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class VerifyView(BaseModel):
    ok: bool
    checked: int
    last_seq: int
    last_hash: str
    seq: int | None
    kind: str | None
    detail: str
    summary: str


class Health(BaseModel):
    status: Literal["ok"]


class ErrorDetail(BaseModel):
    reason: str
    message: str


class ErrorView(BaseModel):
    error: ErrorDetail
