"""The request bodies of the coordinator's HTTP API.

Requests are strict: no coercion (``"30"`` is not a number, ``1`` is not ``true``) and no
fields beyond those named here.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contracts.grant import Identifier

MAX_TIMEOUT_SECONDS = 3600.0


def _both(first: str, second: str) -> dict[str, Any]:
    """JSON Schema: both members given (not null, and a flag only when true)."""
    given = {"trust_on_first_use": {"const": True}}
    return {
        "required": [first, second],
        "properties": {
            name: given.get(name, {"not": {"type": "null"}}) for name in (first, second)
        },
    }


class StrictRequest(BaseModel):
    """A request body: built at import, unlike the views, since FastAPI reads each body
    model through a TypeAdapter of its own, which pydantic warns about for a deferred one."""

    model_config = ConfigDict(strict=True, extra="forbid")


class RegisterRequest(StrictRequest):
    """``federation register``: one of ``trust_key``, ``expect_kid`` or ``trust_on_first_use``
    says which keys may sign the card."""

    # The rule of one_anchor, stated in the schema too.
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "not": {
                "anyOf": [
                    _both("trust_key", "expect_kid"),
                    _both("trust_key", "trust_on_first_use"),
                    _both("expect_kid", "trust_on_first_use"),
                ]
            }
        },
    )

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
    allow_origins: list[Annotated[str, Field(min_length=1, max_length=2048)]] = Field(
        default_factory=list,
        max_length=16,
        description="origins besides the card's own that its interfaces may be on",
    )
    take_address_from: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="the registered agent whose address the card names, which the operator "
        "gives to this agent: that agent is removed",
    )

    @model_validator(mode="after")
    def one_anchor(self) -> RegisterRequest:
        given = [self.trust_key is not None, self.expect_kid is not None, self.trust_on_first_use]
        if sum(given) > 1:
            raise ValueError("give at most one of trust_key, expect_kid, trust_on_first_use")
        return self


class DelegationRequest(StrictRequest):
    """``federation delegate``: one handoff to a registered agent."""

    # The rule of cancel_needs_wait, stated in the schema too (JSON Schema if/then).
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"wait": {"const": False}}, "required": ["wait"]},
            "then": {"properties": {"cancel_after": {"type": "null"}}},
        },
    )

    to: str = Field(min_length=1, max_length=128, description="the registered agent's name")
    skill: str = Field(min_length=1, max_length=256)
    input: dict[str, Any]
    timeout: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_SECONDS)
    cancel_after: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS)
    # None: the run's own principal, derived from its id (no two runs share one).
    principal: Identifier | None = None
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


class CancelRequest(StrictRequest):
    """``federation cancel``: why the run is cancelled (kept in the ledger and the run)."""

    reason: str | None = Field(default=None, min_length=1, max_length=500)


class RevokeRequest(StrictRequest):
    """``federation revoke``: the run or handoff whose grants are revoked, and why."""

    target: str = Field(min_length=1, max_length=128)
    reason: str | None = Field(default=None, min_length=1, max_length=500)


class VerifyRequest(StrictRequest):
    bundle: dict[str, Any] | None = Field(default=None, description="an exported run bundle")


class ConsistencyRequest(StrictRequest):
    first: str | int = Field(description="a signed tree head (compact JWS) or a kept head's size")
    second: str | int = Field(description="the other head, in the same form")


class AuditCredentialRequest(StrictRequest):
    """``federation agents audit-credential``: the token of ONE agent's audit routes."""

    token: str = Field(
        min_length=1,
        max_length=4096,
        pattern=r"^[!-~]+$",
        repr=False,
        description="sent only to the origin the agent is registered from; never shown",
    )
