"""The ``federation audit`` commands: verify (the ledger, or a bundle offline against the
operator's keys), show, export, prove, consistency and reconcile."""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from contracts import strict_json
from coordinator.cli import printers
from coordinator.cli.backends import Coordinator
from coordinator.cli.inputs import read_object
from coordinator.errors import LedgerError, UsageError

if TYPE_CHECKING:  # each command imports what only it uses (start-up time)
    from coordinator.audit.anchors import Anchors

# `audit reconcile`: its verdict's exit code (see README, exit codes).
RECONCILE_EXIT_CODES = {"agree": 0, "disagree": 1, "not_checked": 5}


def cmd_audit(args: argparse.Namespace, coordinator: Coordinator) -> int:
    if args.audit_command in AUDIT_PROOFS:
        return AUDIT_PROOFS[args.audit_command](args, coordinator)
    if args.audit_command == "verify" and args.bundle is not None:
        return cmd_verify_bundle(args)
    if args.audit_command == "verify":
        if args.coordinator_key or args.remote_key or args.unanchored:
            raise UsageError("key options go with --bundle", "bundle_required")
        bundle = None
        where = "ledger"
        report = coordinator.audit_verify(bundle)
        if args.json:
            printers.print_json(report)
            return 0 if report["ok"] else 1
        return printers.print_verify(report, where)
    if args.audit_command == "show":
        view = coordinator.audit_show(args.run_id)
        if args.json:
            printers.print_json(view)
        else:
            print(printers.render_reconstruction(view))
        return 0
    bundle = coordinator.audit_export(args.run_id)
    text = json.dumps(bundle, indent=2, ensure_ascii=False)
    if args.output is None:
        print(text)
    else:
        args.output.write_text(text + "\n")
        print(f"wrote {args.output} ({len(bundle.get('events', []))} events, signed head)")
    return 0


def cmd_verify_bundle(args: argparse.Namespace) -> int:
    """``audit verify --bundle``: checked here, offline, against the keys the operator
    gives (never those the bundle carries, nor a server's word)."""
    bundle = read_object(args.bundle, "bundle")
    anchors = bundle_anchors(args.coordinator_key, args.remote_key)
    if anchors is not None and args.unanchored:
        raise UsageError("--unanchored goes with no key", "anchor_conflict")
    # the checker is loaded once the input is read: a bad file is reported at once
    from coordinator.audit.proof_check import verify_document
    from coordinator.cli.audit_printers import print_bundle_check
    from coordinator.service.api_models import verify_view

    report = verify_document(bundle, anchors, unanchored=args.unanchored)
    if args.json:
        printers.print_json({**verify_view(report).model_dump(), "anchored": report.anchored})
        return 0 if report.ok else 1
    return print_bundle_check(verify_view(report).model_dump(), f"bundle {args.bundle}")


def bundle_anchors(coordinator_keys: list[Path], remote_keys: list[Path]) -> Anchors | None:
    """The trust anchors from key files, or None when none is given."""
    from coordinator.audit.anchors import Anchors, read_anchor

    if not coordinator_keys and not remote_keys:
        return None
    if not coordinator_keys:
        raise UsageError("--remote-key needs --coordinator-key too", "anchor_missing")
    try:
        return Anchors.of(
            [read_anchor(_key_text(path)) for path in coordinator_keys],
            [read_anchor(_key_text(path)) for path in remote_keys],
        )
    except LedgerError as exc:
        raise UsageError(str(exc), exc.reason) from None


def _key_text(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}", "anchor_unreadable") from None


def cmd_audit_prove(args: argparse.Namespace, coordinator: Coordinator) -> int:
    bundle = coordinator.audit_prove(args.run_id)
    text = json.dumps(bundle, indent=2, ensure_ascii=False)
    if args.output is None:
        print(text)
        return 0
    args.output.write_text(text + "\n")
    head = strict_json.loads(_jws_payload(bundle["tree_head"]))
    print(
        f"wrote {args.output} ({len(bundle['events'])} events, inclusion proofs against the "
        f"signed tree head of {head['tree_size']} events, root {head['root_hash'][:16]})"
    )
    return 0


def _jws_payload(jws: str) -> bytes:
    part = jws.split(".")[1]
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def tree_head_arg(value: str) -> str | int:
    """A tree size, or the signed tree head held in file ``value`` (the compact JWS, a
    JSON object with ``jws``, or a proof bundle's ``tree_head``)."""
    if value.isdigit():
        return int(value)
    path = Path(value)
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", "head_unreadable") from None
    if text.startswith("{"):
        document = read_object(path, "head")
        text = document.get("tree_head") or document.get("jws") or ""
    if not isinstance(text, str) or text.count(".") != 2:
        raise UsageError(f"{path} holds no signed tree head", "head_unreadable")
    return text


def cmd_audit_consistency(args: argparse.Namespace, coordinator: Coordinator) -> int:
    document = coordinator.audit_consistency(tree_head_arg(args.head_a), tree_head_arg(args.head_b))
    if args.json:
        printers.print_json(document)
    else:
        old, new = document["old"], document["new"]
        verdict = (
            "consistent" if document["consistent"] else f"NOT consistent: {document['reason']}"
        )
        print(
            f"{verdict}: tree head of {new['tree_size']} events (root {new['root_hash'][:16]}) "
            f"and of {old['tree_size']} (root {old['root_hash'][:16]}); {document['detail']}; "
            f"proof of {len(document['proof'])} nodes"
        )
    return 0 if document["consistent"] else 1


def cmd_audit_reconcile(args: argparse.Namespace, coordinator: Coordinator) -> int:
    from coordinator.cli.audit_printers import print_reconcile

    document = coordinator.audit_reconcile(args.run_id)
    if args.json:
        printers.print_json(document)
    else:
        print_reconcile(document)
    return RECONCILE_EXIT_CODES[document["verdict"]]


AUDIT_PROOFS: dict[str, Callable[[argparse.Namespace, Coordinator], int]] = {
    "prove": cmd_audit_prove,
    "consistency": cmd_audit_consistency,
    "reconcile": cmd_audit_reconcile,
}
