"""An artifact's content as kept: read back, checked against its hash, shown as untrusted text.

What a remote returned is kept whole in the run store's ``artifacts`` table, as the exact
JSON text received: the text whose sha256 is the ``content_hash`` of the ledger's
``artifact.*`` event, and which a proof bundle carries. Every view of a run reads it from
there, and only after hashing it again:

* :func:`with_content` gives each artifact of a run's document its ``number`` (its place
  in the run's list, from 1: the N of ``GET /v1/runs/{id}/artifacts/N`` and of
  ``federation run show RUN --artifact N``), ``untrusted: true``, ``content_check``
  (``verified``, ``hash_mismatch`` or ``not_kept``) and, for an admitted one, its
  ``content`` as received when it verified and is at most :data:`VIEW_BYTES` long (else
  ``content_cut``). A refused artifact keeps the content its document holds, as before.
* :func:`whole` is the exact kept text of one artifact, or a typed error.
* :func:`shown` is content for a person to read: one part a line (text parts as their
  text, other parts as JSON), every control character and every bidirectional control
  written as an escape (``\\x1b``, ``\\u202e``) so that none can drive a terminal or
  reorder what is read, cut at a limit. The console escapes it again as HTML.

Nothing here imports a server or the database driver: ``run show`` prints through it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contracts import strict_json
from coordinator.errors import LedgerError, UsageError

if TYPE_CHECKING:
    from fastapi import APIRouter
    from starlette.responses import Response

    from coordinator.storage.runs import RunStore

# An admitted artifact's content the run view carries whole (a return contract admits at
# most 64,000 bytes by default); longer is only served by the artifact route.
VIEW_BYTES = 256 * 1024
VERIFIED, HASH_MISMATCH, NOT_KEPT = "verified", "hash_mismatch", "not_kept"
CUT = "… (cut to fit)"
# C0 but newline and tab, DEL, C1, line and paragraph separators, and the Unicode
# bidirectional controls (embeddings, overrides, isolates, marks).
_BIDI = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
# the same, newline and tab too (for what is shown on one line)
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")


@dataclass(frozen=True)
class Kept:
    """One row of the run store's ``artifacts`` table: what a branch returned, as received."""

    branch: str
    decision: str
    content_hash: str
    text: str | None

    @property
    def check(self) -> str:
        if self.text is None:
            return NOT_KEPT
        digest = "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()
        return VERIFIED if digest == self.content_hash else HASH_MISMATCH


def kept(store: RunStore, run_id: str) -> list[Kept]:
    """The artifacts the run store kept for ``run_id``, in the order they were received."""
    return [
        Kept(row["attempt_id"], row["decision"], row["content_hash"], row["content"])
        for row in store.rows("artifacts", run_id)
    ]


def _match(artifacts: list[dict[str, Any]], rows: Iterable[Kept]) -> list[Kept | None]:
    """The kept row of each artifact of a document: same branch, decision and hash, each
    row used once (a row kept with a receipt, ``covered_by_receipt``, is no artifact's)."""
    left = list(rows)
    found: list[Kept | None] = []
    for artifact in artifacts:
        key = (artifact.get("branch"), artifact.get("decision"), artifact.get("content_hash"))
        row = next((r for r in left if (r.branch, r.decision, r.content_hash) == key), None)
        if row is not None:
            left.remove(row)
        found.append(row)
    return found


def with_content(document: dict[str, Any], rows: Iterable[Kept]) -> dict[str, Any]:
    """``document`` with each artifact's number, check and (admitted) content as kept."""
    artifacts = [dict(a) for a in document.get("artifacts") or []]
    matched = zip(artifacts, _match(artifacts, rows), strict=True)
    for number, (artifact, row) in enumerate(matched, 1):
        check = row.check if row is not None else NOT_KEPT
        artifact.update(number=number, untrusted=True, content_check=check)
        if artifact.get("decision") != "admitted" or row is None or row.text is None:
            continue
        cut = len(row.text.encode()) > VIEW_BYTES
        artifact["content"] = _parsed(row.text) if check == VERIFIED and not cut else None
        artifact["content_cut"] = cut
    return {**document, "artifacts": artifacts}


def _parsed(text: str) -> Any:
    """The kept text as JSON (it was received as JSON); None if it cannot be read as such
    (its whole is still served as text)."""
    try:
        return strict_json.loads(text)
    except ValueError:
        return None


def whole(document: Mapping[str, Any], rows: Iterable[Kept], number: int) -> str:
    """The exact kept text of the run's ``number``-th artifact (its sha256 is its
    ``content_hash``): ``unknown_artifact``, ``artifact_not_kept`` or, when the text is
    no longer what the ledger recorded, ``artifact_hash_mismatch``."""
    artifacts = list(document.get("artifacts") or [])
    _numbered(document, number)
    row = _match(artifacts, rows)[number - 1]
    if row is None or row.text is None:
        raise UsageError(f"artifact {number} was not kept whole", "artifact_not_kept")
    if row.check != VERIFIED:
        raise _mismatch(number)
    return row.text


def whole_content(view: Mapping[str, Any], number: int) -> Any:
    """The content of the ``number``-th artifact of a run's view (:func:`with_content`),
    all of it, or why not (as :func:`whole`; ``artifact_too_long`` past the view's limit)."""
    artifact = _numbered(view, number)
    if artifact.get("content_check") == HASH_MISMATCH:
        raise _mismatch(number)
    if artifact.get("content") is None:
        path = f"GET /v1/runs/{view.get('run_id')}/artifacts/{number}"
        if artifact.get("content_cut"):
            raise UsageError(
                f"artifact {number} is too long for the view: {path}", "artifact_too_long"
            )
        raise UsageError(f"artifact {number} was not kept whole", "artifact_not_kept")
    return artifact["content"]


def _numbered(document: Mapping[str, Any], number: int) -> dict[str, Any]:
    artifacts = list(document.get("artifacts") or [])
    if not 1 <= number <= len(artifacts):
        raise UsageError(
            f"run {document.get('run_id')} has {len(artifacts)} artifacts, no number {number}",
            "unknown_artifact",
        )
    found: dict[str, Any] = artifacts[number - 1]
    return found


def _mismatch(number: int) -> LedgerError:
    return LedgerError(
        f"artifact {number} no longer hashes to the content hash the ledger recorded",
        "artifact_hash_mismatch",
    )


def untrusted_lines(artifact: Mapping[str, Any], limit: int, whole_hint: str) -> list[str]:
    """An artifact of a run's view as lines for a terminal, set apart and marked
    untrusted, escaped and cut at ``limit`` (``whole_hint`` says how to get it all)."""
    head = f"artifact {artifact.get('number')} ({artifact.get('decision')})"
    if artifact.get("content_check") == HASH_MISMATCH:
        return ["", f"{head}: not shown, it no longer hashes to the content hash recorded"]
    if artifact.get("content") is None and artifact.get("content_cut"):
        return ["", f"{head}: too long to show here; all of it: {whole_hint}"]
    if artifact.get("content") is None:
        return []
    text = shown(artifact["content"], limit)
    lines = ["", f"{head}: UNTRUSTED content from the remote, shown as received:"]
    lines += [f"  | {line}" for line in text.splitlines()]
    if text.endswith(CUT):
        lines.append(f"  | all of it: {whole_hint}")
    return lines


def artifact_router(artifact: Callable[[str, int], str]) -> APIRouter:
    """``GET /runs/{run_id}/artifacts/{number}``, for the API's ``/v1`` router, answered
    by ``artifact`` (the service's :meth:`~.facade.CoordinatorService.artifact`)."""
    from fastapi import APIRouter
    from fastapi.responses import PlainTextResponse

    from coordinator.service.api_models import ErrorView

    router = APIRouter(tags=["runs"])
    described = {
        400: "the request is not one this route takes",
        401: "no or wrong operator token",
        404: "unknown run or artifact, or an artifact not kept",
        409: "the kept text no longer hashes to the ledger's content_hash",
        422: "bad input",
    }
    # the artifact is plain text; every refusal is the API's JSON error
    errors: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorView, "content": {"application/json": {}}, "description": text}
        for status, text in described.items()
    }

    @router.get(
        "/runs/{run_id}/artifacts/{number}",
        response_class=PlainTextResponse,
        response_model=None,
        responses=errors,
    )
    def whole_artifact(run_id: str, number: int) -> Response:
        """The run's ``number``-th artifact (from 1, as ``run show`` numbers them), the
        exact JSON text received, checked against the ledger's hash first; untrusted,
        served as a plain-text attachment never sniffed."""
        return plain_text(artifact(run_id, number), file_name(run_id, number))

    return router


def plain_text(text: str, name: str) -> Response:
    """``text`` as an inert download: plain text, never sniffed, sandboxed, attached."""
    from starlette.responses import Response

    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Content-Disposition": f'attachment; filename="{name}"',
        "Cache-Control": "no-store",
    }
    return Response(text, media_type="text/plain; charset=utf-8", headers=headers)


def file_name(run_id: str, number: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:120]
    return f"{safe}-artifact-{number}.json"


def escaped(text: str, *, keep_lines: bool = True) -> str:
    """``text`` with every control and bidirectional character as a visible escape;
    newlines and tabs are kept when ``keep_lines`` (else escaped too)."""
    return (_UNSAFE if keep_lines else _UNSAFE_IN_LINE).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(content: Any, limit: int) -> str:
    """``content`` as lines to read: each artifact's parts, text as text, the rest as
    JSON; what is not a list of artifacts as JSON whole; escaped; cut at ``limit``."""
    if isinstance(content, list) and all(_is_artifact(item) for item in content):
        lines = []
        for artifact in content:
            name = escaped(str(artifact.get("name") or "-"), keep_lines=False)
            ident = escaped(str(artifact.get("artifactId")), keep_lines=False)
            lines.append(f"artifact {ident} ({name}):")
            lines += [f"  {_part_line(part)}" for part in artifact["parts"]]
        text = "\n".join(lines)
    else:
        text = escaped(_json(content))
    return text if len(text) <= limit else text[:limit] + "\n" + CUT


def _is_artifact(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("parts"), list)


def _part_line(part: Any) -> str:
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return "text: " + escaped(part["text"])
    if isinstance(part, dict) and "data" in part:
        return "data: " + escaped(_json(part["data"]))
    return "part: " + escaped(_json(part))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
