"""The return contract: what a handoff must send back for its result to be admitted.

Every handoff record carries exactly one, never none, and it is stored with the record:

* ``finding``: our specialists' contract. Exactly one strict :class:`~contracts.evidence.Finding`
  in one JSON data part, every evidence id among the records sent to the target, and the
  handoff binding (``handoffId``, ``attempt``) echoed in the task's metadata.
* ``json_schema``: for any other agent. The operator declares a JSON Schema (Draft 2020-12)
  per skill at registration or per delegation; the single JSON data part returned must
  match it, within the contract's size and media-type limits.
* ``held_for_review``: the default for an agent with no declared contract. What comes back
  is kept (hash, size, content, provenance) but never admitted: nothing checked it, so it is
  not evidence.

Whichever the kind, the handoff binding is also checked whenever the target's card declares
our delegation scheme (``check_binding``): such an agent receives the binding in the token
and the message, so it can echo it.

This module is pure data: it parses and checks a declared schema, it sends nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

import jsonschema
from pydantic import ConfigDict

from contracts import strict_json
from contracts.model import Model

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
MAX_SCHEMA_BYTES = 32_000
MAX_RETURN_BYTES = 64_000
JSON_MEDIA_TYPES = ("application/json",)


class ReturnContractKind(StrEnum):
    FINDING = "finding"
    JSON_SCHEMA = "json_schema"
    HELD_FOR_REVIEW = "held_for_review"


class ReturnContractError(ValueError):
    """A declared return contract that cannot be used; ``reason`` is a stable code."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ReturnContract(Model):
    """One handoff's return contract, as stored with its record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ReturnContractKind = ReturnContractKind.HELD_FOR_REVIEW
    # Who declared it: "default", "pilot", "registration" or "delegation".
    source: str = "default"
    sent_record_ids: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    schema_digest: str | None = None
    media_types: tuple[str, ...] = JSON_MEDIA_TYPES
    max_bytes: int = MAX_RETURN_BYTES
    check_binding: bool = False

    @property
    def name(self) -> str:
        """How the operator reads it: the kind, and for a schema its digest."""
        if self.kind is ReturnContractKind.JSON_SCHEMA:
            return f"json_schema {self.schema_digest}"
        return self.kind.value

    def summary(self) -> dict[str, Any]:
        """What ``run show`` and the ledger say about the contract (never the schema body)."""
        return {
            "kind": self.kind.value,
            "source": self.source,
            "schema_digest": self.schema_digest,
            "max_bytes": self.max_bytes,
            "media_types": list(self.media_types),
            "check_binding": self.check_binding,
            "sent_record_ids": list(self.sent_record_ids),
        }

    def binding_required(self, required: bool) -> ReturnContract:
        """This contract, also checking the handoff binding when ``required``."""
        if not required or self.check_binding:
            return self
        return self.model_copy(update={"check_binding": True})

    def declared_by(self, source: str) -> ReturnContract:
        return self.model_copy(update={"source": source})


def held_for_review() -> ReturnContract:
    """The default: nothing is declared, so nothing returned is admitted."""
    return ReturnContract()


def finding_contract(sent_record_ids: Iterable[str] = (), source: str = "pilot") -> ReturnContract:
    """Our specialists' contract, citing only ``sent_record_ids``."""
    return ReturnContract(
        kind=ReturnContractKind.FINDING,
        source=source,
        sent_record_ids=tuple(sorted(set(sent_record_ids))),
        check_binding=True,
    )


def schema_contract(schema: object, source: str = "delegation") -> ReturnContract:
    """A JSON Schema contract, or :class:`ReturnContractError` if the schema is unusable.

    The schema must be a JSON object of at most :data:`MAX_SCHEMA_BYTES`, valid against the
    Draft 2020-12 meta-schema, and name no other draft in ``$schema``."""
    if not isinstance(schema, dict):
        raise ReturnContractError("a return schema must be a JSON object", "return_schema_invalid")
    try:
        encoded = strict_json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise ReturnContractError(
            f"a return schema must be plain JSON: {exc}", "return_schema_invalid"
        ) from None
    if len(encoded) > MAX_SCHEMA_BYTES:
        raise ReturnContractError(
            f"the return schema is {len(encoded)} bytes, over {MAX_SCHEMA_BYTES}",
            "return_schema_too_large",
        )
    declared = schema.get("$schema", DRAFT_2020_12)
    if declared not in (DRAFT_2020_12, DRAFT_2020_12 + "#"):
        raise ReturnContractError(
            f"the return schema declares {declared!r}; only Draft 2020-12 is supported",
            "return_schema_draft",
        )
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "schema"
        raise ReturnContractError(
            f"the return schema is not valid Draft 2020-12 at {where}: {exc.message}",
            "return_schema_invalid",
        ) from None
    return ReturnContract(
        kind=ReturnContractKind.JSON_SCHEMA,
        source=source,
        json_schema=schema,
        schema_digest="sha256:" + hashlib.sha256(encoded).hexdigest(),
    )
