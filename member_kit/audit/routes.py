"""The operator's audit routes: the decision log's signed head and proofs, and the heads
of the coordinator's ledger this service witnessed (``federation audit reconcile``).

Every route needs the audit operator token (``Settings.audit_token``, env
``REMOTE_RISK_AUDIT_TOKEN``) as a bearer token; without one configured they answer 404.

* ``GET /audit/head``: ``{"tree_head": JWS}``, a head signed now;
* ``GET /audit/handoffs/{handoff_id}``: ``{"tree_head", "entries"}``, the log's entries
  of that handoff, each with its RFC 9162 inclusion proof against ``tree_head``;
* ``GET /audit/consistency?from=N``: ``{"tree_head", "old_size", "proof"}``, the proof
  that the current tree extends the tree of its first ``N`` entries;
* ``GET /audit/witnessed?signer=T``: ``{"heads": [JWS, ...]}``, the heads of other logs
  kept that verified with a key of RFC 7638 thumbprint ``T`` (repeatable; none: every
  head kept). The coordinator asks for its own keys' thumbprints.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_cards.edge.operator_token import OperatorToken
from agent_cards.keys import SigningKey
from member_kit.audit.log import DecisionLedger, entry_proofs
from member_kit.audit.witness import WitnessedHeads

_Handler = Callable[[Request], Awaitable[Response]]


def _answer(document: dict[str, Any]) -> JSONResponse:
    return JSONResponse(document, headers={"Cache-Control": "no-store"})


def audit_routes(
    token: str | None,
    log: DecisionLedger,
    witnessed: WitnessedHeads,
    key: Callable[[], SigningKey],
    issuer: str,
    realm: str,
) -> list[Route]:
    """The audit routes, behind the operator ``token`` (``realm``: its challenge's)."""
    guard = OperatorToken(token, realm, "audit_disabled")

    def guarded(handler: Callable[[Request], dict[str, Any]]) -> _Handler:
        async def endpoint(request: Request) -> Response:
            refused = guard.refusal(request)
            if refused is not None:
                return refused
            log.flush()
            try:
                return _answer(handler(request))
            except ValueError as exc:
                body = {"error": {"reason": "bad_request", "message": str(exc)}}
                return JSONResponse(body, 400)

        return endpoint

    def head(request: Request) -> dict[str, Any]:
        return {"tree_head": log.sign_head(key(), issuer).jws}

    def handoff(request: Request) -> dict[str, Any]:
        signed = log.sign_head(key(), issuer)
        entries = log.of_handoff(request.path_params["handoff_id"], signed.tree_size)
        tree = log.tree(signed.tree_size)
        return {"tree_head": signed.jws, "entries": entry_proofs(entries, tree)}

    def consistency(request: Request) -> dict[str, Any]:
        raw = request.query_params.get("from", "")
        if not raw.isdigit():
            raise ValueError("from must be a tree size (a non-negative integer)")
        signed = log.sign_head(key(), issuer)
        old = int(raw)
        if old > signed.tree_size:
            raise ValueError(f"the log holds {signed.tree_size} entries, not {old}")
        proof = log.consistency(old, signed.tree_size)
        return {"tree_head": signed.jws, "old_size": old, "proof": [n.hex() for n in proof]}

    def witness(request: Request) -> dict[str, Any]:
        signers = request.query_params.getlist("signer")
        return {"heads": witnessed.jws(signers or None)}

    return [
        Route("/audit/head", guarded(head), methods=["GET"], name="audit_head"),
        Route("/audit/handoffs/{handoff_id}", guarded(handoff), methods=["GET"]),
        Route("/audit/consistency", guarded(consistency), methods=["GET"]),
        Route("/audit/witnessed", guarded(witness), methods=["GET"]),
    ]
