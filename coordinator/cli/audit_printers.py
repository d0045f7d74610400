"""What ``federation audit reconcile`` and ``audit verify --bundle`` print (beside
:mod:`coordinator.cli.printers`): the verdict and what was, and was not, checked."""

from __future__ import annotations

from typing import Any

RECONCILE_HEADLINES = {
    "agree": "both sides agree",
    "disagree": "DISAGREE",
    "not_checked": "NOT CHECKED",
}
WITNESS_TITLES = (
    ("its log extends the heads we hold", "remote_log_extends_heads_we_hold"),
    ("our ledger extends the heads it holds", "our_ledger_extends_heads_it_holds"),
)


def print_reconcile(document: dict[str, Any]) -> None:
    """``audit reconcile``: the verdict (agree, DISAGREE, NOT CHECKED), what was not
    checked and why per agent, then per handoff each field on both sides, then each
    witness check."""
    headline = RECONCILE_HEADLINES[document["verdict"]]
    if document.get("reason"):
        headline += f": {document['reason']} ({document.get('detail')})"
    print(f"run {document['run_id']}: {headline}")
    for entry in document.get("not_checked", []):
        print(f"  not checked: {entry['agent']}: {entry['reason']}: {entry['detail']}")
    for note in document.get("notes", []):
        print(f"  note: {note}")
    for handoff in document["handoffs"]:
        print_reconciled_handoff(handoff)
    for witness in document["witnesses"]:
        if witness.get("reason"):
            print(f"  {witness['agent']}: witness checks not made: {witness['reason']}")
            continue
        for title, key in WITNESS_TITLES:
            checks = witness[key]
            bad = [c for c in checks if not c["consistent"]]
            verdict = "yes" if not bad else f"NO ({len(bad)} inconsistent: a fork or rewrite)"
            print(f"  {witness['agent']}: {title} ({len(checks)} heads): {verdict}")


def print_reconciled_handoff(handoff: dict[str, Any]) -> None:
    where = f"{handoff['handoff_id']} ({handoff['agent']}"
    if handoff.get("parent_handoff_id"):  # a hop of a chain, minted by token exchange
        where += f", hop {handoff.get('depth')} from {handoff['parent_handoff_id']}"
    where += ")"
    if handoff.get("reason"):
        print(f"  {where}: not checked: {handoff['reason']}")
        return
    mark = "agree" if handoff["agree"] else "DISAGREE"
    if handoff.get("differing"):
        mark += f" on {', '.join(handoff['differing'])}"
    proven = "" if handoff["proven"] else " (an entry is not proven in the remote's head)"
    print(f"  {where}: {mark}{proven}")
    for name, field in handoff["fields"].items():
        sign = "=" if field["agree"] else "!="
        print(f"    {name:<16} {_or_none(field['coordinator'])} {sign} {_or_none(field['remote'])}")


def _or_none(value: Any) -> str:
    return "(none)" if value is None else str(value)


def print_bundle_check(report: dict[str, Any], where: str) -> int:
    """``audit verify --bundle``: the verdict, then (when it holds) what was checked: the
    steps, the key that signed the head, the tokens, each receipt with its agent and the
    key that verified it."""
    print(f"{where}: {report['summary']}")
    if not report["ok"] or not report.get("steps"):
        return 0 if report["ok"] else 1
    print("checked:")
    print("\n".join(f"  {step}" for step in report["steps"]))
    print(f"tree head signed by the coordinator key {report.get('head_kid') or '-'}")
    print(f"tokens: {report.get('tokens', 0)} (each the one a minted grant records)")
    receipts = report.get("receipts") or []
    print(f"receipts: {len(receipts)} verified" + ("" if receipts else " (the run holds none)"))
    for receipt in receipts:
        print(
            f"  event {receipt['seq']}, handoff {receipt['handoff_id']}, agent "
            f"{receipt.get('agent') or '(not recorded)'}: signed by key {receipt['kid']} "
            f"(iss {receipt['iss']})"
        )
    return 0
