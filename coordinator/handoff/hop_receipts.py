"""Hop receipts: the receipts of the agents a member delegated to, checked at its return.

A member that sub-delegates (token exchange, :mod:`coordinator.authority.exchange`) gets
back from each agent it asked that agent's receipt for its task. The kit carries them up
in the artifact of the member's own answer, under the receipts extension's key
(``metadata[RECEIPTS_EXTENSION_URI].hops``, an array of compact JWS; see
docs/receipts-extension.md), covered by the member's own receipt. Before the member's
return is admitted, each one is checked, in this order:

1. it is a compact JWS whose ``jti`` names a child this coordinator minted by exchange
   from the returning handoff (a ``delegation.exchanged`` hop whose ``parent_handoff_id``
   is the handoff): else ``hop_receipt_mismatch``;
2. it verifies as a receipt with a key pinned for the agent that hop was minted for
   (the registered agent the hop names), in that key's own name: else
   ``hop_receipt_invalid`` (a key of the member's, a stranger's) or
   ``hop_receipt_issuer_mismatch``;
3. it states the hop: the hop's ``handoff_id``, attempt 1, no ``req_digest`` (a child
   binds none), ``iss`` the ``aud`` the child was minted for, a ``task_id`` and a
   terminal ``state``: else ``hop_receipt_mismatch``.

One refused hop receipt refuses the member's whole return with that reason: a member
that relays what the coordinator cannot verify is lying about its hop or passing on a
lie, and nothing of the chain is admitted on its word. The refusal is recorded
(``hop.receipt_refused``), the verified ones kept (``hop.receipt``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_cards.keys import b64url_decode
from agent_cards.transparency.receipts import relayed_receipts, verified_receipt
from agent_cards.transparency.statements import StatementInvalid
from agent_cards.trusted import TrustedKeys
from contracts import strict_json
from contracts.wire import TERMINAL_TASK_STATES

MISMATCH = "hop_receipt_mismatch"
_TERMINAL = tuple(sorted(state.value for state in TERMINAL_TASK_STATES))


@dataclass(frozen=True)
class Hop:
    """A child minted by exchange from the returning handoff, and its agent's keys."""

    jti: str
    handoff_id: str
    aud: str
    to: str
    keys: TrustedKeys


# The hops exchanged from the returning handoff by child jti (read when first needed).
Hops = Callable[[], Mapping[str, Hop]]


@dataclass(frozen=True)
class CheckedHop:
    jws: str
    claims: dict[str, Any]
    hop: Hop


@dataclass(frozen=True)
class HopRefusal:
    """The first hop receipt refused: its place among those carried, and why."""

    index: int
    reason: str


def check_hops(
    task: Mapping[str, Any], hops: Hops
) -> tuple[tuple[CheckedHop, ...], HopRefusal | None]:
    """The hop receipts ``task`` carries (its ``to_wire`` form, made once by the receipt
    check), each verified, or the first one refused."""
    relayed = relayed_receipts(task.get("artifacts"))
    if not relayed:
        return (), None
    known = hops()
    checked: list[CheckedHop] = []
    for index, receipt in enumerate(relayed):
        result = hop_problem(receipt, known)
        if isinstance(result, str):
            return tuple(checked), HopRefusal(index, result)
        checked.append(result)
    return tuple(checked), None


def hop_problem(receipt: Any, known: Mapping[str, Hop]) -> str | CheckedHop:
    """The verified hop receipt, or the reason it is refused (steps above)."""
    hop = known.get(_named_jti(receipt)) if isinstance(receipt, str) else None
    if hop is None:
        return MISMATCH
    try:
        claims = verified_receipt(receipt, hop.keys)
    except StatementInvalid as exc:
        return f"hop_{exc.reason}"
    if not _states_the_hop(claims, hop):
        return MISMATCH
    return CheckedHop(str(receipt), claims, hop)


def _states_the_hop(claims: Mapping[str, Any], hop: Hop) -> bool:
    attempt = claims.get("attempt")
    return (
        claims.get("handoff_id") == hop.handoff_id
        and type(attempt) is int
        and attempt == 1
        and claims.get("req_digest") is None
        and claims.get("iss") == hop.aud
        and isinstance(claims.get("task_id"), str)
        and claims.get("state") in _TERMINAL
    )


def _named_jti(receipt: str) -> str:
    """The ``jti`` a receipt names, unverified (to find the hop whose keys verify it)."""
    parts = receipt.split(".")
    try:
        claims = strict_json.loads(b64url_decode(parts[1])) if len(parts) == 3 else None
    except (ValueError, UnicodeDecodeError):
        return ""
    jti = claims.get("jti") if isinstance(claims, dict) else None
    return jti if isinstance(jti, str) else ""
