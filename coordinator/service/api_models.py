"""The answer documents of the coordinator's HTTP API (its request bodies are in
:mod:`coordinator.service.api_requests`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field

from contracts.model import Model

if TYPE_CHECKING:
    from coordinator.audit.log.verification import VerifyReport


class RemoteQuestion(Model):
    """What a remote asked when it stopped for input or authorisation: its own words,
    untrusted, never an instruction; the handoff was closed, nothing was granted."""

    state: str = Field(description="TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED")
    asks_for: Literal["input", "authorization"]
    untrusted: Literal[True]
    text: str = Field(description="the status message's text parts, as received")
    data: list[Any] = Field(description="the status message's data parts, as received")
    other_parts: list[dict[str, Any]] = Field(description="url or raw parts, by size only")
    truncated: bool = Field(description="whether text or data was cut to fit")
    content_hash: str = Field(description="sha256 of the message parts as received")
    size: int


class BranchView(Model):
    """One handoff attempt of a run, as its record says."""

    model_config = ConfigDict(extra="allow")

    branch: str
    target: str
    owner_during_slice: str | None = None
    final_owner: str | None = None
    state: str
    reason: str | None = None
    state_version_seen: int | None = None
    lease_expires_at: str | None = Field(default=None, description="ISO 8601 UTC")
    attempt: int
    remote_task_id: str | None = None
    remote_state: str | None = None
    live: bool
    contract: str | None = Field(default=None, description="the return contract's name")
    return_contract: dict[str, Any] | None = Field(
        default=None, description="what the return contract checks"
    )
    remote_question: RemoteQuestion | None = Field(
        default=None, description="what the remote asked, if it stopped for input or auth"
    )


class ArtifactView(Model):
    """What came back on a branch, with the return-admission verdict."""

    model_config = ConfigDict(extra="allow")

    branch: str
    contract: str | None = Field(default=None, description="the contract it was judged by")
    decision: str
    reason: str | None = None
    content_hash: str | None = None
    size: int | None = None
    received_at: str | None = None
    content: Any = Field(default=None, description="the artifact as received (untrusted)")
    number: int | None = Field(
        default=None, description="its place in the run's list, from 1: GET .../artifacts/N"
    )
    untrusted: bool = Field(default=True, description="content is the remote's, not ours")
    content_check: str | None = Field(
        default=None,
        description="verified (the kept text hashes to content_hash), hash_mismatch, not_kept",
    )
    content_cut: bool | None = Field(
        default=None, description="too long for the run view: GET .../artifacts/N has it whole"
    )


class CancellationView(Model):
    """Who cancelled a run, in their own words why, and when."""

    by: str
    reason: str
    at: str = Field(description="ISO 8601 UTC")


class RevocationPush(Model):
    """What one member was told: ``pushed`` (with the tasks it cancelled) or ``failed``
    (with the cause; the member learns it from the status list at its next poll)."""

    agent: str
    handoffs: list[str]
    outcome: str
    cancelled: list[str] = []
    cause: str | None = None


class RevocationView(Model):
    """A revocation: the run, the handoffs whose grants are revoked, each push."""

    run_id: str
    target: str
    handoffs: list[str]
    pushes: list[RevocationPush]
    state: str | None = None


class BudgetView(Model):
    limit: dict[str, int | None]
    remaining: dict[str, int | None]
    ledger: list[dict[str, Any]]
    # The run's model requests over the federation (its own roles' and the remotes').
    model: dict[str, int | None] | None = None


class RunDocument(Model):
    """A run as its records tell it: complete at every point it is written. Kinds of run
    add their own fields (a demo case, a supervised run's outcome)."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    kind: str | None = None
    owner: str
    ownership_path: list[str] = []
    started_at: str | None = None
    cancelled: bool = False
    cancellation: CancellationView | None = None
    state_version: int = 0
    branches: list[BranchView] = []
    live_branches: list[str] = []
    artifacts: list[ArtifactView] = []
    budget: BudgetView | None = None
    refusals: list[str] = []


class DelegationDocument(RunDocument):
    """The answer to one handoff driven to its end (``federation delegate``)."""

    handoff_id: str
    target: str
    skill: str
    remote_task_id: str | None
    remote_state: str | None
    local_state: str
    reason: str | None = Field(
        description="the first cause (a retry refused for budget does not replace the failure "
        "that caused it); an agent never reached within the retry window (15 s) ends FAILED "
        "dispatch_failed:unreachable, the CLI's exit 3"
    )
    grant: dict[str, Any] | None = Field(description="the delegation token's claims")
    remote_question: RemoteQuestion | None = Field(
        default=None, description="what the remote asked, if it stopped for input or auth"
    )
    received_artifacts: list[dict[str, Any]] = Field(description="as received (untrusted)")
    notes: list[str]


class Reconstruction(Model):
    """A run rebuilt from its ledger events alone (``federation audit show``)."""

    model_config = ConfigDict(extra="allow")

    run_id: str | None
    owner: str | None
    ownership_path: list[str | None]
    authority: dict[str, Any] | None
    branches: list[dict[str, Any]]
    live_branches: list[str]
    artifacts: list[dict[str, Any]]
    budget: list[dict[str, Any]]
    grants: list[dict[str, Any]]
    # every token exchange from the run's grants: the hops of its delegation chains
    hops: list[dict[str, Any]] = []
    effects: int
    cancelled: bool
    cancellation: CancellationView | None = None
    disposition: dict[str, Any] | None
    events: int


class AgentView(Model):
    name: str
    endpoint: str
    binding: str = Field(default="JSONRPC", description="the binding chosen from its card")
    protocol_version: str = "1.0"
    extended_card: bool = Field(default=False, description="an extended card was verified")
    card_url: str
    skills: list[str]
    trust: str
    verified_kid: str | None
    registered_at: str
    pending_approval: bool


class SkillView(Model):
    id: str
    name: str
    scopes: list[str] = Field(description="what the skill's security requirements ask for")


class CardDiff(Model):
    """What a held card asks for beyond the registered one (added) and drops (removed)."""

    interfaces_added: list[str]
    interfaces_removed: list[str]
    skills_added: list[str]
    skills_removed: list[str]
    scopes_added: dict[str, list[str]] = Field(description="per skill")
    scopes_removed: dict[str, list[str]] = Field(description="per skill")
    security_schemes_changed: bool
    security_requirements_changed: bool


class PendingCard(Model):
    """A changed card held until the operator approves it (``federation agents pending``)."""

    agent: str
    card_url: str
    current_kid: str | None
    held_kid: str | None = Field(description="the kid that signed the held card")
    held_trust: str | None = Field(description="how the held card's keys were pinned")
    diff: CardDiff
    approve: str = Field(description="the command that adopts it")


class AgentDetail(AgentView):
    """One registered agent (``federation agents show``)."""

    description: str
    version: str
    pinned_kids: list[str] = Field(description="the keys its card must be signed with")
    identity: str | None = Field(
        description="the audience its tokens are minted for: the RFC 9278 thumbprint URI of "
        "the pinned key that verified its card (null: register it again)"
    )
    verified_form: str | None = Field(description="the canonical form its signature was over")
    allowed_origins: list[str] = Field(description="origins allowed beside the card's own")
    skill_details: list[SkillView]
    return_contracts: dict[str, dict[str, Any]] = Field(description="declared per skill")
    pending: PendingCard | None = Field(description="a changed card held for approval")


class RegistrationView(Model):
    status: str
    agent: AgentView


class Submitted(Model):
    run_id: str
    attempt_id: str
    state: str


class RunSummary(Model):
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


class RunList(Model):
    runs: list[RunSummary]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null at the end")


class CheckedReceipt(Model):
    """A receipt a bundle check verified: its event, handoff, the agent the coordinator
    sent the handoff to, the kid (RFC 7638 thumbprint) of the key that verified it."""

    seq: int
    handoff_id: str | None
    agent: str | None
    kid: str | None
    iss: str | None


class VerifyView(Model):
    ok: bool
    checked: int
    last_seq: int
    last_hash: str
    seq: int | None
    kind: str | None
    detail: str
    summary: str
    # What a bundle check did (empty for the ledger's own chain): its steps, the kid of
    # the key that signed the head, the tokens matched, the receipts verified.
    steps: list[str] = []
    head_kid: str | None = None
    tokens: int = 0
    receipts: list[CheckedReceipt] = []


def verify_view(report: VerifyReport) -> VerifyView:
    return VerifyView(
        ok=report.ok,
        checked=report.checked,
        last_seq=report.last_seq,
        last_hash=report.last_hash,
        seq=report.seq,
        kind=str(report.kind) if report.kind is not None else None,
        detail=report.detail,
        summary=str(report),
        steps=list(report.steps),
        head_kid=report.head_kid,
        tokens=report.tokens,
        receipts=[CheckedReceipt.model_validate(dict(r)) for r in report.receipts],
    )


class Health(Model):
    status: Literal["ok"]


class ErrorDetail(Model):
    reason: str
    message: str


class ErrorView(Model):
    error: ErrorDetail


class AuditCredentialView(Model):
    """Whose credential and where it is sent; never the token."""

    agent: str
    origin: str | None = None
    set: bool
    removed: bool | None = None
