"""A delegation-chain checker written from docs/delegation-token.md alone.

It follows that page's "Checking a chain offline" and "Narrowing rules" (and RFC 7515,
7638, 8693), not the project's code: it exists to show the page is precise enough for
someone else to check a chain and agree with ``contracts.chain`` on every link. It uses
the Python standard library and ``cryptography``, nothing of this project.

``check(tokens, owner_jwks)`` takes the compact tokens root first and the owner's JWK Set;
it answers ``None`` when every link holds, else ``(index of the child, reason)``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

MAX_DEPTH = 3
HOLDER_PREFIX = "urn:ietf:params:oauth:jwk-thumbprint:sha-256:"
BUDGET_MEMBERS = ("actions", "context_units", "effects", "model_requests", "model_tokens")
IDENTIFIER = re.compile(r"[A-Za-z0-9._:@/+#=~-]{1,256}")


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims(token: str, owner_jwks: dict[str, Any]) -> dict[str, Any]:
    """The claims of ``token`` once its signature verified with a key of the owner."""
    header_part, claims_part, signature_part = token.split(".")
    header = json.loads(_b64(header_part))
    key = next(k for k in owner_jwks["keys"] if k.get("kid") == header["kid"])
    message = f"{header_part}.{claims_part}".encode("ascii")
    signature = _b64(signature_part)
    try:
        if key["kty"] == "OKP":
            Ed25519PublicKey.from_public_bytes(_b64(key["x"])).verify(signature, message)
        else:
            numbers = ec.EllipticCurvePublicNumbers(
                int.from_bytes(_b64(key["x"])), int.from_bytes(_b64(key["y"])), ec.SECP256R1()
            )
            der = encode_dss_signature(
                int.from_bytes(signature[:32]), int.from_bytes(signature[32:])
            )
            numbers.public_key().verify(der, message, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("signature_invalid") from None
    value: dict[str, Any] = json.loads(_b64(claims_part))
    return value


def token_hash(token: str) -> str:
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return "sha-256:" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def actor_subs(act: Any) -> list[Any]:
    subs = []
    while isinstance(act, dict):
        subs.append(act.get("sub"))
        act = act.get("act")
    return subs


def _extends(child_act: Any, parent_act: Any) -> bool:
    """The child's chain is the parent's with zero or more actors on top."""
    current = child_act
    while True:
        if current == parent_act:
            return True
        if not isinstance(current, dict):
            return False
        current = current.get("act")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def widened(child: dict[str, Any], parent: dict[str, Any]) -> str | None:
    """The first dimension, in the order of the Narrowing rules table, in which the child
    is wider; a missing or malformed claim counts as wider."""
    scope = child.get("scope")
    found = child.get("handoff")
    handoff: dict[str, Any] = found if isinstance(found, dict) else {}
    rules = [
        ("sub", lambda: child["sub"] == parent["sub"]),
        ("tenant", lambda: child["tenant"] == parent["tenant"]),
        ("aud", lambda: isinstance(child["aud"], str) and IDENTIFIER.fullmatch(child["aud"])),
        (
            "scope",
            lambda: (
                isinstance(scope, str)
                and scope != ""
                and set(scope.split(" ")) <= set(parent["scope"].split(" "))
            ),
        ),
        ("iat", lambda: _is_int(child["iat"]) and child["iat"] >= parent["iat"]),
        ("nbf", lambda: _is_int(child["nbf"]) and child["nbf"] >= parent["nbf"]),
        ("exp", lambda: _is_int(child["exp"]) and child["exp"] <= parent["exp"]),
        ("act", lambda: _extends(child.get("act"), parent.get("act"))),
        (
            "handoff.final_owner",
            lambda: handoff["final_owner"] == parent["handoff"]["final_owner"],
        ),
    ]
    for name, holds in rules:
        try:
            if not holds():
                return name
        except (KeyError, TypeError):
            return name
    return _budget_widened(handoff.get("budget"), parent["handoff"]["budget"])


def _budget_widened(budget: Any, held: dict[str, Any]) -> str | None:
    if not isinstance(budget, dict) or set(budget) - set(BUDGET_MEMBERS):
        return "budget.actions"
    for name in ("actions", "context_units", "effects"):
        if not _is_int(budget.get(name)) or budget[name] < 0:
            return f"budget.{name}"
    for name in ("actions", "context_units", "effects"):
        if budget[name] > held[name]:
            return f"budget.{name}"
    for name in ("model_requests", "model_tokens"):
        if held.get(name) is not None and (budget.get(name) is None or budget[name] > held[name]):
            return f"budget.{name}"
    return None


def link(parent_token: str, parent: dict[str, Any], child: dict[str, Any]) -> str | None:
    """The doc's eight steps, in order."""
    ref = child.get("parent")
    if ref is None:
        return "parent_missing"
    if ref.get("jti") != parent["jti"] or ref.get("hash") != token_hash(parent_token):
        return "parent_hash_mismatch"
    if child["iss"] != parent["iss"]:
        return "issuer_changed"
    dimension = widened(child, parent)
    if dimension is not None:
        return "widens_" + dimension.replace(".", "_")
    act = child.get("act")
    if not isinstance(act, dict) or act.get("act") != parent.get("act"):
        return "act_not_one_deeper"
    if act.get("sub") != parent["aud"]:
        return "act_not_one_deeper"
    cnf = child.get("cnf")
    if cnf is not None and HOLDER_PREFIX + str(cnf.get("jkt")) != parent["aud"]:
        return "cnf_not_holder"
    if len(actor_subs(act)) > MAX_DEPTH:
        return "chain_too_deep"
    if child["aud"] == child["iss"] or child["aud"] in actor_subs(act):
        return "chain_loop"
    return None


def check(tokens: list[str], owner_jwks: dict[str, Any]) -> tuple[int, str] | None:
    verified = [claims(token, owner_jwks) for token in tokens]
    for index in range(1, len(tokens)):
        problem = link(tokens[index - 1], verified[index - 1], verified[index])
        if problem is not None:
            return index, problem
    return None
