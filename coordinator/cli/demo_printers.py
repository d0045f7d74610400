"""What ``federation demo`` and ``federation evaluate`` print (beside
:mod:`coordinator.cli.printers`): each case's trace, the chain case, the supervised runs
and the evaluation's table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from coordinator.cli.printers import render_table, units

if TYPE_CHECKING:  # a printer imports what only it uses (start-up time)
    from coordinator.assessment.chain_case import ChainResult
    from coordinator.assessment.evaluation_report import Row
    from coordinator.assessment.model_gateway import ModelConfig
    from coordinator.assessment.pilot import PilotResult
    from coordinator.assessment.supervisor import SupervisedResult

DEMO_COLUMNS = [
    "branch",
    "target",
    "owner_during_slice",
    "state",
    "state_version_seen",
    "attempt",
    "remote_state",
]


# --- the demo -------------------------------------------------------------------------------


def render_case(result: PilotResult) -> str:
    """A readable trace of one case: fields sent, remote ids and states, findings, outcome."""
    from coordinator.handoff.run import ownership_rows

    lines = [f"== case {result.case} (run {result.run.run_id})"]
    for c in result.consultations:
        where = "remote" if c.remote else "local"
        lines.append(
            f"  {c.record.source} -> {c.target} ({where}) received: {', '.join(c.sent_fields)}"
        )
        if c.remote:
            lines.append(
                f"    remote task {c.record.remote_task_id or '-'} state "
                f"{c.record.remote_state or '-'}"
            )
            if c.grant:
                lines.append(
                    f"    delegation token jti {c.grant['jti']} scope {c.grant['scope']!r} "
                    f"exp {c.grant['exp']}"
                )
        lines.append(
            f"    handoff {c.record.handoff_id}: {c.record.state.value} ({c.record.reason})"
        )
        if c.finding is not None:
            code = f" [{c.finding.error_code}]" if c.finding.error_code else ""
            label = "summary, unverified remote text" if c.remote else "summary"
            lines.append(f"    finding {c.finding.status.value}{code}")
            lines.append(f"      {label}: {c.finding.summary}")
            if c.finding.facts:
                facts = ", ".join(f"{k}={v}" for k, v in c.finding.facts.items())
                lines.append(f"      facts: {facts}")
    a = result.assessment
    lines.append(f"  assessment: {a.status.value} - {a.summary}")
    for conflict in a.conflicts:
        lines.append(f"    conflict on {conflict.fact}: {conflict.values}")
    lines.append(f"  owner: {result.run.owner} (path: {' -> '.join(result.run.ownership_path)})")
    if result.former_owner_rejected is not None:
        verdict = "rejected" if result.former_owner_rejected else "ACCEPTED (bug)"
        lines.append(f"  former owner coordinator tried to continue: {verdict}")
    if result.clarification:
        lines.append(f"  privacy asks: {result.clarification}")
    lines.append("  ownership by branch:")
    table = render_table(ownership_rows(result.run), DEMO_COLUMNS)
    lines.extend(f"    {line}" for line in table.splitlines())
    return "\n".join(lines)


def render_chain_case(result: ChainResult) -> str:
    """The chain case: the three services, each hop's budget carved from its parent's,
    what the parent has left, the run's outcome and whether its proof bundle verifies."""
    lines = [
        f"== case {result.case} (run {result.run_id})",
        "  coordinator, privacy-review (member A) and legal-terms (member B): three processes",
        f"  operator -> privacy-review (depth 1): budget {units(result.parent)}",
    ]
    for hop in result.hops:
        verdict = "granted" if hop.get("granted") else f"refused ({hop.get('reason')})"
        lines.append(
            f"    -> {hop.get('to')} (depth {hop.get('depth')}) by token exchange, {verdict}: "
            f"scope {hop.get('scope')!r}, budget {units(hop.get('budget') or {})}"
        )
    nested = "exactly (parent = children + left)" if result.nested else "NO (bug)"
    lines.append(f"    left to privacy-review: {units(result.left)}; budgets nest {nested}")
    lines.append(f"  handoff to privacy-review: {result.local_state}")
    verdict = "verifies" if result.verified else "DOES NOT VERIFY"
    lines.append(f"  proof bundle (every hop, each party's key): {verdict}")
    return "\n".join(lines)


# --- the supervised demo and the evaluation --------------------------------------------


def render_supervised(result: SupervisedResult) -> str:
    """A readable account of one supervised run: calls, outcome, commentary if any."""
    lines = [f"== case {result.case} (supervised by a model; {result.rounds} rounds)"]
    for call in result.calls:
        lines.append(f"  round {call.round}: ask_specialist({call.specialist}) [{call.call_id}]")
    for c in result.consultations:
        status = c.finding.status.value if c.finding else "not admitted"
        lines.append(f"  {c.target}: handoff {c.record.state.value}, finding {status}")
    if result.pilot is None:
        lines.append(f"  run {result.status} [{result.reason}]: {result.detail}")
    else:
        a = result.pilot.assessment
        lines.append(f"  assessment (merge, not the model): {a.status.value} - {a.summary}")
        if result.pilot.clarification:
            lines.append(f"  privacy asks: {result.pilot.clarification}")
    if result.commentary_unverified:
        cut = " [cut at the length limit]" if result.commentary_truncated else ""
        lines.append(f"  model commentary (unverified): {result.commentary_unverified}{cut}")
    elif result.commentary_withheld:
        lines.append("  model commentary withheld: the assessment is not ready_for_draft")
    usage = result.model
    tokens = "unknown" if usage["total_tokens"] is None else usage["total_tokens"]
    lines.append(f"  model requests {usage['requests']}/{usage['request_budget']}, tokens {tokens}")
    return "\n".join(lines)


def render_evaluation(rows: Sequence[Row], model: ModelConfig | None) -> str:
    from coordinator.assessment import evaluation_report

    header: tuple[str, ...] = (
        *("configuration", "case", "run", "status", "sources", "private", "pass", "ms"),
        *("boundary", "requests", "tokens"),
    )
    table = [header] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    where = f"model {model.model}" if model else "offline: deterministic rules, no model"
    out = [f"federation evaluate ({where})", "", *lines, ""]
    if any(group["runs"] > 1 for group in evaluation_report.summary(rows)):
        out.append("distribution per configuration and case:")
        for group in evaluation_report.summary(rows):
            statuses = ", ".join(f"{k} x{v}" for k, v in group["statuses"].items())
            out.append(
                f"  {group['configuration']:<17} {group['case']:<8} passed "
                f"{group['passed']}/{group['runs']}  {statuses}  ms median "
                f"{group['elapsed_ms_median']} (min {group['elapsed_ms_min']}, max "
                f"{group['elapsed_ms_max']})"
            )
        out.append("")
    passed = sum(row.passed for row in rows)
    out.append(f"{passed}/{len(rows)} rows passed.")
    out.extend(f"\n{note}" for note in evaluation_report.CAVEATS)
    return "\n".join(out)


def _cells(row: Row) -> tuple[str, ...]:
    reason = f" ({row.reason})" if row.reason else ""
    return (
        row.configuration,
        row.case,
        str(row.run),
        row.status + reason,
        ",".join(row.sources) or "-",
        "absent" if row.private_note_absent else "LEAKED",
        "yes" if row.passed else "NO",
        f"{row.elapsed_ms:.1f}",
        str(row.boundary_calls),
        str(row.model_requests),
        "unknown" if row.model_tokens is None else str(row.model_tokens),
    )
