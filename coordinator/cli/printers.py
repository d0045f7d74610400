"""Every line the ``federation`` command prints, from documents, for local and ``--server``.

A command gets a document (a dict, as the service and its HTTP API answer it) and hands
it to one printer here, so a run looks the same whether it was read from a data
directory or through a coordinator's API. ``--json`` prints the document itself. What the
demo and the evaluation print is in :mod:`coordinator.cli.demo_printers`, the audit
verdicts in :mod:`coordinator.cli.audit_printers`.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

OWNERSHIP_COLUMNS = [
    "branch",
    "target",
    "owner_during_slice",
    "state",
    "reason",
    "state_version_seen",
    "lease_expires_at",
    "attempt",
    "remote_task_id",
    "remote_state",
    "contract",
]
ARTIFACT_COLUMNS = ["number", "branch", "contract", "decision", "reason", "content_hash", "size"]
# Characters of an artifact's content ``run show`` prints (``--artifact N``: all of it).
ARTIFACT_CHARS = 2_000
UNIT_COLUMNS = [
    "branch",
    "kind",
    "actions",
    "context_units",
    "effects",
    "model_requests",
    "reason",
]


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def render_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(row.get(c) if row.get(c) is not None else "-") for c in columns] for row in rows]
    widths = [
        max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


# --- agents ---------------------------------------------------------------------------------


def print_registration(registration: dict[str, Any], url: str) -> int:
    agent = registration["agent"]
    if registration["status"] == "pending_approval":
        print(
            f"{agent['name']}: the card changed and asks for more than before; it is held as "
            f"pending. Review it, then run: federation register {url} --approve",
            file=sys.stderr,
        )
        return 1
    print(
        f"{registration['status']} {agent['name']}: {agent['endpoint']} "
        f"(skills: {', '.join(agent['skills'])}; card signed by {agent['verified_kid']}, "
        f"trust: {agent['trust']})"
    )
    return 0


def print_agents(agents: list[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        keys = ("name", "endpoint", "card_url", "skills", "binding", "protocol_version")
        print_json([{key: agent.get(key) for key in keys} for agent in agents])
        return
    if not agents:
        print("no agents registered")
    for agent in agents:
        print(
            f"{agent['name']}\t{agent['endpoint']}\t{_binding(agent)}\t"
            f"skills: {', '.join(agent['skills'])}"
        )


def _binding(agent: dict[str, Any]) -> str:
    """The binding the coordinator calls the agent on, e.g. ``GRPC 1.0``."""
    return f"{agent.get('binding', 'JSONRPC')} {agent.get('protocol_version', '1.0')}"


def render_agent(agent: dict[str, Any]) -> str:
    """``agents show``: what the agent is, how its card is trusted, what it asks for."""
    lines = [
        f"{agent['name']}: {agent['description']} (card version {agent['version']})",
        f"endpoint: {agent['endpoint']}",
        f"binding: {_binding(agent)}; extended card: "
        + ("verified" if agent.get("extended_card") else "none"),
        f"card: {agent['card_url']}",
        f"trust: {agent['trust']}; card signed by {agent['verified_kid']} "
        f"({agent.get('verified_form') or 'form not recorded'}); "
        f"pinned keys: {', '.join(agent['pinned_kids']) or 'none'}",
        f"identity (its tokens' audience): {agent.get('identity') or 'unknown: register again'}",
        "origins allowed beside the card's: "
        + (", ".join(agent.get("allowed_origins", [])) or "none"),
        f"registered at: {agent['registered_at']}",
        "skills:",
    ]
    for skill in agent["skill_details"]:
        contract = (agent["return_contracts"].get(skill["id"]) or {}).get("kind", "none declared")
        lines.append(
            f"  {skill['id']}: scopes {', '.join(skill['scopes']) or '-'}; "
            f"return contract: {contract}"
        )
    held = agent.get("pending")
    lines.append("held card: " + ("see below" if held else "none"))
    if held:
        lines.append(render_pending([held]))
    return "\n".join(lines)


def render_pending(held: list[dict[str, Any]]) -> str:
    """``agents pending``: per held card, ``+`` what it asks for more, ``-`` what it drops."""
    from coordinator.service.agent_views import diff_lines

    if not held:
        return "no cards held for approval"
    blocks = []
    for card in held:
        lines = [
            f"{card['agent']}: held card signed by {card['held_kid']} ({card['held_trust']}); "
            f"registered card signed by {card['current_kid']}"
        ]
        lines += [f"  {line}" for line in diff_lines(card["diff"])]
        lines.append(f"  to adopt it: {card['approve']}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# --- runs -----------------------------------------------------------------------------------


def print_delegation(document: dict[str, Any]) -> None:
    print(f"run {document['run_id']} handoff {document['handoff_id']} -> {document['target']}")
    print(f"remote task {document['remote_task_id'] or '-'}: {document['remote_state'] or '-'}")
    print(f"local state: {document['local_state']} ({document['reason']})")
    contract = document.get("return_contract") or {}
    verdict = document.get("verdict") or "none (no answer was judged)"
    print(f"return contract: {contract.get('kind', '-')}; verdict: {verdict}")
    if document.get("remote_question"):
        print("\n".join(question_lines(document["remote_question"])))
    for note in document["notes"]:
        print(f"note: {note}")
    for artifact in document["artifacts"]:
        print(f"artifact {artifact['decision']} ({artifact['reason']}) {artifact['content_hash']}")
    for artifact in document["received_artifacts"]:
        print(f"received {artifact['artifactId']}:")
        for part in artifact["parts"]:
            shown = {k: v for k, v in part.items() if k in ("text", "data", "url", "raw")}
            print(f"  {json.dumps(shown, ensure_ascii=False)}")


RUN_COLUMNS = ["run_id", "kind", "state", "age", "targets", "reason"]


def print_runs(
    page: dict[str, Any],
    *,
    as_json: bool,
    now: datetime | None = None,
    state: str | None = None,
) -> None:
    """``federation runs`` (those in ``state``, if given), from this data directory or a
    coordinator's API."""
    from coordinator.service.run_list import age

    if as_json:
        print_json(page)
        return
    if not page["runs"]:
        print(f"no runs match --state {state}" if state else "no runs recorded")
        return
    moment = now or datetime.now(UTC)
    rows = [
        {**run, "age": age(run["started_at"], moment), "targets": ",".join(run["targets"])}
        for run in page["runs"]
    ]
    print(render_table(rows, RUN_COLUMNS))
    if page.get("next_cursor"):
        print(f"more: federation runs --cursor {page['next_cursor']}")


def render_document(document: dict[str, Any]) -> str:
    """The ``run show`` text: ownership table, artifact view, budget ledger, pending."""
    budget = document.get("budget") or {"limit": "-", "remaining": "-", "ledger": []}
    path = document.get("ownership_path") or [document.get("owner")]
    lines = [
        f"run {document['run_id']}: owner {document.get('owner')} "
        f"(path {' -> '.join(str(owner) for owner in path)}); state version "
        f"{document.get('state_version', '-')}{'; CANCELLED' if document.get('cancelled') else ''}",
        "",
        "ownership by branch:",
        render_table(document.get("branches", []), OWNERSHIP_COLUMNS),
        "",
        "artifacts:",
        render_table(document["artifacts"], ARTIFACT_COLUMNS)
        if document.get("artifacts")
        else "(none received)",
        "",
        f"budget: limit {units(budget['limit'])}; remaining {units(budget['remaining'])}",
        render_table(budget["ledger"], UNIT_COLUMNS),
        *_model_line(budget.get("model")),
        *chain_lines(document.get("chain") or []),
        "",
        "pending: " + (", ".join(document.get("live_branches", [])) or "nothing"),
    ]
    cancellation = document.get("cancellation")
    if cancellation:
        lines.append(cancellation_line(cancellation))
    for branch in document.get("branches", []):
        if branch.get("remote_question"):
            lines += ["", *question_lines(branch["remote_question"], branch["branch"])]
    for artifact in document.get("artifacts", []):
        lines += artifact_lines(artifact, document["run_id"])
    return "\n".join(lines)


def artifact_lines(artifact: dict[str, Any], run_id: str) -> list[str]:
    """An artifact's content for ``run show``, set apart and marked untrusted."""
    from coordinator.service import artifact_content  # a pure rule: no server, no driver

    whole = f"federation run show {run_id} --artifact {artifact.get('number')}"
    return artifact_content.untrusted_lines(artifact, ARTIFACT_CHARS, whole)


def whole_artifact(document: dict[str, Any], number: int) -> str:
    """``run show --artifact N``: all of it, as JSON with every non-ASCII character
    escaped; the exact bytes received are ``GET /v1/runs/{id}/artifacts/N``."""
    from coordinator.service import artifact_content

    return json.dumps(artifact_content.whole_content(document, number), indent=2)


def cancellation_line(cancellation: dict[str, Any]) -> str:
    return (
        f"cancelled by {cancellation.get('by')} at {cancellation.get('at')}: "
        f"{cancellation.get('reason')}"
    )


def question_lines(question: dict[str, Any], branch: str | None = None) -> list[str]:
    """What a remote asked, set apart and marked: it is the remote's text, not ours."""
    where = f" on {branch}" if branch else ""
    lines = [
        f"the remote asked for {question['asks_for']}{where} ({question['state']}); "
        "UNTRUSTED text from the remote, shown as received:"
    ]
    lines += [f"  | {line}" for line in str(question.get("text") or "").splitlines()]
    lines += [f"  | data: {json.dumps(value, ensure_ascii=False)}" for value in question["data"]]
    lines += [
        f"  | ({part['kind']} part, {part['size']} chars)" for part in question["other_parts"]
    ]
    if question.get("truncated"):
        lines.append(
            f"  | (cut to fit; all of it: {question['size']} bytes, {question['content_hash']})"
        )
    lines.append("the handoff was closed; delegate again with what it asks for")
    return lines


def render_cancel(document: dict[str, Any]) -> str:
    """``federation cancel``: the run's branches as they stand after the cancel."""
    lines = [f"run {document['run_id']}: cancelled"]
    if document.get("cancellation"):
        lines.append(cancellation_line(document["cancellation"]))
    for branch in document.get("branches", []):
        lines.append(
            f"  {branch['branch']} -> {branch['target']}: {branch['state']} ({branch['reason']}); "
            f"remote task {branch.get('remote_task_id') or '-'}: "
            f"{branch.get('remote_state') or '-'}"
        )
    return "\n".join(lines)


def render_revocation(revocation: dict[str, Any]) -> str:
    """``federation revoke``: what was revoked and what each member was told."""
    handoffs = ", ".join(revocation["handoffs"]) or "-"
    lines = [f"run {revocation['run_id']}: grants revoked for {handoffs}"]
    for push in revocation.get("pushes", []):
        if push["outcome"] == "pushed":
            tasks = ", ".join(push.get("cancelled") or []) or "none running"
            lines.append(f"  {push['agent']}: told; tasks cancelled: {tasks}")
        else:
            lines.append(
                f"  {push['agent']}: push failed ({push.get('cause')}); "
                "it learns it from the status list at its next poll"
            )
    return "\n".join(lines)


# --- audit ----------------------------------------------------------------------------------


def print_verify(report: dict[str, Any], where: str) -> int:
    print(f"{where}: {report['summary']}")
    return 0 if report["ok"] else 1


def _model_line(model: dict[str, Any] | None) -> list[str]:
    """The run's model requests over the federation, the remotes' among them."""
    if not model:
        return []
    tokens = model.get("total_tokens")
    return [
        f"model requests {model.get('requests')} (remote {model.get('remote_requests')}), "
        f"tokens {'unknown' if tokens is None else tokens}"
    ]


def units(value: Any) -> str:
    """A budget's units; one the run names no limit of (``None``) says so."""
    if not isinstance(value, dict):
        return str(value)
    return (
        ", ".join(
            f"{name} {'no limit' if amount is None else amount}" for name, amount in value.items()
        )
        or "-"
    )


def describe_authority(authority: dict[str, Any] | None) -> str:
    """The run's root authority in words: who, whose data, which scopes, budget, expiry."""
    if not authority:
        return "-"
    spend = units(authority.get("budget") or {})
    return (
        f"principal {authority.get('principal')}, tenant {authority.get('tenant')}, "
        f"scope {' '.join(authority.get('scope') or []) or '-'}, budget {spend}, "
        f"expires {authority.get('expires_at')}"
    )


# One hop of a delegation chain: who asked (holder), for whom, from which parent grant.
HOP_COLUMNS = ["granted", "depth", "to", "parent_jti", "jti", "scope", "budget", "reason"]


def chain_lines(hops: list[dict[str, Any]]) -> list[str]:
    """The hops of the run's delegation chains (token exchanges), if any."""
    if not hops:
        return []
    rows = [{**hop, "budget": units(hop.get("budget") or {})} for hop in hops]
    return ["", "delegation chain (token exchanges):", render_table(rows, HOP_COLUMNS)]


def render_reconstruction(view: dict[str, Any]) -> str:
    """``audit show``: the run as the ledger alone tells it."""
    disposition = view.get("disposition") or {}
    lines = [
        f"run {view['run_id']} (from {view['events']} ledger events): owner {view['owner']} "
        f"(path {' -> '.join(str(o) for o in view['ownership_path'])})"
        f"{'; CANCELLED' if view['cancelled'] else ''}",
        f"authority: {describe_authority(view['authority'])}",
        *([cancellation_line(view["cancellation"])] if view.get("cancellation") else []),
        f"trace: {view.get('trace_id') or '(none)'}",
        "",
        "ownership by branch:",
        render_table(view["branches"], OWNERSHIP_COLUMNS),
        "",
        "grants:",
        render_table(view["grants"], ["branch", "jti", "scope", "aud", "exp", "claims_digest"])
        if view["grants"]
        else "(none)",
        *chain_lines(view.get("hops") or []),
        "",
        "artifacts:",
        render_table(view["artifacts"], ["branch", "decision", "reason", "content_hash", "size"])
        if view["artifacts"]
        else "(none received)",
        "",
        "budget:",
        render_table(view["budget"], UNIT_COLUMNS),
        f"effects granted: {view['effects']}",
        "",
        "pending: " + (", ".join(view["live_branches"]) or "nothing"),
        "disposition: "
        + (
            f"{disposition.get('status')} - {disposition.get('summary')}"
            if disposition
            else "none recorded"
        ),
    ]
    return "\n".join(lines)
