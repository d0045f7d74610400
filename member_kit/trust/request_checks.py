"""What a send's token binds beyond its handoff: the request and the issuer's tree head.

:func:`check_request_digest` holds the message received to the token's ``req_digest``
(contracts/request_digest.py, the function the coordinator minted it with);
:func:`head_witness` verifies and keeps the issuer's signed tree head a token shows
(``log_head``), so that this service witnesses the coordinator's ledger. Both refuse
with a :class:`~member_kit.trust.denials.DelegationDenied` naming the token.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from agent_cards.keys import TrustedKeys
from agent_cards.transparency.heads import verify_head_signer
from agent_cards.transparency.statements import StatementInvalid
from contracts.canonical import CanonicalizationError
from contracts.request_digest import request_digest
from contracts.wire import JSONObject
from member_kit.audit.witness import WitnessedHeads
from member_kit.trust.denials import DelegationDenied, DenialReason
from member_kit.trust.verifier import VerifiedDelegation

# How many heads (each once verified and kept) a process remembers: a few minutes' worth.
KEPT_HEADS_REMEMBERED = 256


def _message_of(params: JSONObject) -> dict[str, Any]:
    message = params.get("message")
    return message if isinstance(message, dict) else {}


def check_request_digest(params: JSONObject, verified: VerifiedDelegation, required: bool) -> None:
    """The message is the one the token's ``req_digest`` binds (contracts/request_digest.py);
    a token binding none is refused only when the service requires a binding."""
    bound = verified.grant.req_digest
    if bound is None and not required:
        return
    reason = DenialReason.REQUEST_DIGEST_MISSING
    if bound is not None:
        try:
            if request_digest(_message_of(params)) == bound:
                return
        except CanonicalizationError:
            pass
        reason = DenialReason.REQUEST_DIGEST_MISMATCH
    denial = DelegationDenied(reason)
    denial.jti, denial.claims_digest = verified.grant.jti, verified.claims_digest
    raise denial


def head_witness(
    issuers: Mapping[str, TrustedKeys], heads: WitnessedHeads
) -> Callable[[VerifiedDelegation], None]:
    """The authorizer's ``witness``: the tree head a token carries (``log_head``) is
    verified with the keys pinned for the token's issuer and kept under the thumbprint
    of the key that verified it; one that does not verify, or is of another log,
    refuses the request (``log_head_invalid``).

    The coordinator signs a new head at most once a second, so most tokens carry one
    already kept: a head whose exact JWS was verified with the same keys and kept is not
    verified or written again (a rotation of the issuer's keys makes them other keys)."""
    kept: OrderedDict[str, TrustedKeys] = OrderedDict()
    lock = threading.Lock()  # the gRPC binding calls in from its own threads

    def witness(verified: VerifiedDelegation) -> None:
        jws = verified.grant.log_head
        if jws is None:
            return
        keys = issuers.get(verified.grant.iss)
        with lock:
            if keys is not None and kept.get(jws) is keys:
                return
        try:
            if keys is None:
                raise StatementInvalid("untrusted_key", "no keys for the issuer")
            head, signer = verify_head_signer(jws, keys, issuer=verified.grant.iss)
        except StatementInvalid as exc:
            denial = DelegationDenied(DenialReason.LOG_HEAD_INVALID, str(exc))
            denial.jti, denial.claims_digest = verified.grant.jti, verified.claims_digest
            raise denial from None
        heads.keep(head, signer)
        if keys is not None:
            with lock:
                kept[jws] = keys
                while len(kept) > KEPT_HEADS_REMEMBERED:
                    kept.popitem(last=False)

    return witness
