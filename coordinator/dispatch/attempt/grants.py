"""The narrowed token one handoff attempt carries, minted from the run's authority."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from contracts.handoff import HandoffRecord
from coordinator.audit.log.current_head import current_head, refreshed
from coordinator.audit.receipts import GRANT_EVENT
from coordinator.authority.delegator import Delegator, GrantRefused, envelope_of, required_scopes
from coordinator.authority.holder import holder_proof_enabled
from coordinator.errors import LedgerError
from coordinator.handoff.run import Run
from coordinator.remote.cards.registered_agent import RegisteredAgent

NO_SCHEME = "target declares no bearer-token scheme: no delegation token sent"


@dataclass(frozen=True)
class AttemptCredentials:
    """The request headers of one attempt, what may be shown of its grant, and a note."""

    headers: dict[str, str] = field(default_factory=dict)
    grant: dict[str, object] | None = None
    note: str | None = None


def _head_signer(run: Run, delegator: Delegator | None) -> tuple[Engine, Ed25519PrivateKey] | None:
    """The ledger whose head ``run``'s tokens show and the key that signs it; None when
    there is no ledger, or its key cannot sign a head."""
    if delegator is None or run.trail.ledger is None:
        return None
    private_key = delegator.keys.signing_key().private_key
    if not isinstance(private_key, Ed25519PrivateKey):
        return None
    return run.trail.ledger.engine, private_key


def ledger_head(run: Run, delegator: Delegator) -> str | None:
    """The ledger's latest signed tree head, which the token shows the remote (a witness
    of the coordinator's ledger); None when the ledger's key cannot sign one."""
    signer = _head_signer(run, delegator)
    if signer is None:
        return None
    engine, private_key = signer
    try:
        head = current_head(engine).latest(
            private_key, delegator.issuer, keep=run.trail.write_with, wait=False
        )
    except LedgerError as exc:  # a ledger that does not extend is not vouched for
        refused = GrantRefused("authority", str(exc))
        refused.reason = exc.reason
        raise refused from None
    return head.jws


async def head_refreshed(run: Run, delegator: Delegator | None) -> None:
    """The head the next token of ``run`` shows, brought up to date off the event loop
    when it is due (:func:`~coordinator.audit.log.current_head.refreshed`)."""
    signer = _head_signer(run, delegator)
    if signer is not None and delegator is not None:
        await refreshed(*signer, delegator.issuer)


def mint_for(
    run: Run,
    agent: RegisteredAgent,
    record: HandoffRecord,
    delegator: Delegator | None,
    request: Mapping[str, Any] | None = None,
    *,
    alone: bool = True,
) -> AttemptCredentials:
    """Mint the attempt's token when the target takes delegation tokens; the grant is in
    the ledger and the store (never the token): a ``grant.minted`` event when ``alone``,
    else held for the dispatch that carries it as its ``grant``
    (:meth:`~coordinator.handoff.run.Run.hold`). ``request`` is the message the attempt
    will send (wire JSON), which the token binds by its digest. Raises
    :class:`GrantRefused` if the run holds no authority to delegate, or minting would
    widen it."""
    scopes = required_scopes(agent.agent_card, record.skill)
    if scopes is None:
        return AttemptCredentials(note=NO_SCHEME)
    if delegator is None:
        raise GrantRefused("authority", "this run holds no authority to delegate")
    before = envelope_of(run.book.remaining(before=record))
    minted = delegator.mint(
        record,
        agent.agent_id,
        scopes,
        remaining=before,
        message=request,
        log_head=ledger_head(run, delegator),
        holder_bound=holder_proof_enabled(),
    )
    summary = minted.summary()  # what the ledger, the store and the outcome show of it
    if alone:
        run.emit(GRANT_EVENT, record, **summary)
    else:
        run.hold(GRANT_EVENT, record, {"grant": summary}, **summary)
    run.minted.setdefault(record.handoff_id, {})[minted.grant.jti] = minted.grant.req_digest or None
    if run.store is not None:
        run.store.add(
            "grants",
            {
                "jti": minted.grant.jti,
                "run_id": run.run_id,
                "attempt_id": record.attempt_id,
                "claims_digest": minted.digest,
                "scope": minted.grant.scope,
                "aud": minted.grant.aud,
                "exp": minted.grant.exp,
            },
        )
    return AttemptCredentials({"Authorization": f"Bearer {minted.token}"}, summary)
