"""The three verdicts of ``audit reconcile``, from the comparisons it made: pure rules.

Telling an operator that two teams disagree says one of them lies, so ``disagree`` is
said only where a comparison was made and failed: a field the two sides state
differently (or one side states and the other does not), an entry of the remote's answer
that is not proven in its own signed head, a log that does not extend a head the other
side holds. Where no comparison could be made the verdict is ``not_checked``, with the
reason, per agent: no audit credential, an agent that keeps no receipts, a remote that
answered 404 or could not be reached, a handoff neither side recorded anything of, a run
with no handoff at all. ``agree`` is said only when every handoff of the run was
compared and every witness check was made.

``disagree`` outweighs ``not_checked`` (a failed comparison is news whatever else could
not be checked), which outweighs ``agree``. The CLI's exit code follows the verdict:
``agree`` 0, ``disagree`` 1, ``not_checked`` 5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.strict_json import json_equal

AGREE, DISAGREE, NOT_CHECKED = "agree", "disagree", "not_checked"
# Reasons a handoff or a run is not checked that no error carries.
NO_HANDOFFS = "no_handoffs"
NO_RECEIPTS = "agent_keeps_no_receipts"
NOT_REGISTERED = "agent_not_registered"
NOTHING_RECORDED = "nothing_recorded"
NO_RECEIPT_YET = "no_receipt_yet"
WITNESS_CHECKS = ("remote_log_extends_heads_we_hold", "our_ledger_extends_heads_it_holds")


def field(ours: Any, theirs: Any) -> dict[str, Any]:
    """One field on both sides; absent on both sides is agreement on its absence."""
    return {"coordinator": ours, "remote": theirs, "agree": json_equal(ours, theirs)}


def handoff_verdict(
    fields: Mapping[str, Mapping[str, Any]],
    proven: bool,
    receipted: bool = True,
    recorded_remotely: bool = True,
) -> dict[str, Any]:
    """``disagree`` (with the fields that differ); ``not_checked`` when neither side
    recorded any of the fields, or when neither holds a receipt yet (a task still
    running: only the token could be compared, and it agrees; or a message still on its
    way, of which the remote has recorded nothing: its silence proves nothing while no
    receipt says it answered); else ``agree``."""
    if not receipted and not recorded_remotely and proven:
        detail = "no receipt on either side yet, and the remote has recorded nothing of it"
        return not_checked(NO_RECEIPT_YET, detail + " (the message may still be on its way)")
    differing = sorted(name for name, value in fields.items() if not value["agree"])
    if differing or not proven:
        return {"verdict": DISAGREE, "agree": False, "differing": differing, "reason": None}
    if all(value["coordinator"] is None for value in fields.values()):
        detail = "neither side recorded a token, task, digest or state of this handoff"
        return not_checked(NOTHING_RECORDED, detail)
    if not receipted:
        detail = "no receipt on either side yet (the task may still run): the token agrees"
        return not_checked(NO_RECEIPT_YET, detail)
    return {"verdict": AGREE, "agree": True, "differing": [], "reason": None}


def not_checked(reason: str, detail: str) -> dict[str, Any]:
    """A comparison not made, and why (never a credential: no message carries one)."""
    return {"verdict": NOT_CHECKED, "agree": False, "reason": reason, "detail": detail}


def witness_verdict(witness: Mapping[str, Any]) -> str:
    if witness.get("reason"):
        return NOT_CHECKED
    consistent = all(check["consistent"] for key in WITNESS_CHECKS for check in witness[key])
    return AGREE if consistent else DISAGREE


def run_verdict(
    handoffs: Sequence[Mapping[str, Any]], witnesses: Sequence[Mapping[str, Any]]
) -> str:
    verdicts = [entry["verdict"] for entry in [*handoffs, *witnesses]]
    if DISAGREE in verdicts:
        return DISAGREE
    if not handoffs or NOT_CHECKED in verdicts:
        return NOT_CHECKED
    return AGREE


def unchecked(
    handoffs: Sequence[Mapping[str, Any]], witnesses: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per agent, each distinct reason something of it was not checked."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in [*handoffs, *witnesses]:
        if entry["verdict"] == NOT_CHECKED:
            key = (str(entry["agent"]), str(entry["reason"]))
            seen.setdefault(key, {"agent": key[0], "reason": key[1], "detail": entry["detail"]})
    return [seen[key] for key in sorted(seen)]


def report(
    run_id: str, handoffs: Sequence[dict[str, Any]], witnesses: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The run's verdict over its handoffs and witness checks, with what was not checked."""
    verdict = run_verdict(handoffs, witnesses)
    return {
        "run_id": run_id,
        "verdict": verdict,
        "agree": verdict == AGREE,
        "reason": None if handoffs else NO_HANDOFFS,
        "detail": None if handoffs else "the run sent no handoff: there is nothing to compare",
        "not_checked": unchecked(handoffs, witnesses),
        "handoffs": list(handoffs),
        "witnesses": list(witnesses),
    }
