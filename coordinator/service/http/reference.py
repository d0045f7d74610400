"""``GET /docs``: the HTTP API's reference as one plain HTML page, from its OpenAPI document.

No scripts and nothing fetched from elsewhere, so it works on a machine without internet
access; ``/openapi.json`` stays the machine-readable source.
"""

from __future__ import annotations

from html import escape
from typing import Any


def render_reference(openapi: dict[str, Any]) -> str:
    info = openapi.get("info", {})
    title = escape(str(info.get("title", "API")))
    sections = [
        _operation(method, path, operation)
        for path, operations in sorted(openapi.get("paths", {}).items())
        for method, operation in operations.items()
    ]
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
        "code{background:#eee;padding:0 .2em}</style></head><body>"
        f"<h1>{title}</h1><p>{escape(str(info.get('description', '')))}</p>"
        "<p>Every route under <code>/v1</code> needs <code>Authorization: Bearer TOKEN</code> "
        '(the operator token). Errors are <code>{"error": {"reason", "message"}}</code>. '
        'The schema: <a href="/openapi.json">/openapi.json</a>.</p>'
        + "".join(sections)
        + "</body></html>"
    )


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    summary = escape(str(operation.get("summary", "")))
    description = escape(str(operation.get("description", "")))
    parameters = "".join(
        f"<li><code>{escape(p['name'])}</code> ({escape(p.get('in', ''))}): "
        f"{escape(str(p.get('description', '')))}</li>"
        for p in operation.get("parameters", [])
    )
    answers = "".join(
        f"<li><code>{escape(code)}</code> {escape(str(answer.get('description', '')))}</li>"
        for code, answer in sorted(operation.get("responses", {}).items())
    )
    return (
        f"<h2><code>{escape(method.upper())} {escape(path)}</code></h2><p>{summary}</p>"
        f"<p>{description}</p>"
        + (f"<h3>Parameters</h3><ul>{parameters}</ul>" if parameters else "")
        + f"<h3>Answers</h3><ul>{answers}</ul>"
    )
