"""A v0.3 Agent Card read as the v1.0 card it describes.

A v0.3 card names its main interface at the top (``url``, ``preferredTransport``,
``protocolVersion``) and others in ``additionalInterfaces``; its security schemes are
OpenAPI-shaped (``{"type": "http", "scheme": "bearer"}``), its requirements plain maps
(``security: [{"scheme": ["scope"]}]``), and ``supportsAuthenticatedExtendedCard`` says
it has an extended card. :func:`to_v1` builds the v1.0 document from those fields (the
card as received is what is stored and verified); fields v1.0 has no place for
(``stateTransitionHistory``) and fields we do not know are left out.
"""

from __future__ import annotations

from typing import Any

from contracts.wire import AgentCard

DEFAULT_TRANSPORT = "JSONRPC"
SCHEME_KINDS = {
    "apiKey": "apiKeySecurityScheme",
    "oauth2": "oauth2SecurityScheme",
    "openIdConnect": "openIdConnectSecurityScheme",
    "mutualTLS": "mtlsSecurityScheme",
}


def is_v03_card(document: dict[str, Any]) -> bool:
    """A card in the v0.3 shape: no ``supportedInterfaces``, a top-level ``url``."""
    return "supportedInterfaces" not in document and isinstance(document.get("url"), str)


def _pick(document: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: document[name] for name in names if document.get(name) is not None}


def _interfaces(document: dict[str, Any]) -> list[dict[str, Any]]:
    version = document.get("protocolVersion") or "0.3"
    main = {
        "url": document["url"],
        "protocolBinding": document.get("preferredTransport") or DEFAULT_TRANSPORT,
        "protocolVersion": version,
    }
    interfaces = [main]
    for extra in document.get("additionalInterfaces") or []:
        if not isinstance(extra, dict):
            continue
        interface = {
            "url": extra.get("url"),
            "protocolBinding": extra.get("transport"),
            "protocolVersion": version,
        }
        if interface not in interfaces:
            interfaces.append(interface)
    return interfaces


def _scheme(scheme: Any) -> Any:
    if not isinstance(scheme, dict):
        return scheme
    kind = scheme.get("type")
    if kind == "http":
        return {"httpAuthSecurityScheme": _pick(scheme, "scheme", "description", "bearerFormat")}
    body = {k: v for k, v in scheme.items() if k != "type"}
    if kind == "apiKey" and "in" in body:
        body["location"] = body.pop("in")
    return {SCHEME_KINDS.get(str(kind), "apiKeySecurityScheme"): body}


def _requirements(security: Any) -> Any:
    if not isinstance(security, list):
        return security
    return [
        {"schemes": {name: {"list": scopes} for name, scopes in entry.items()}}
        if isinstance(entry, dict)
        else entry
        for entry in security
    ]


def _skill(skill: Any) -> Any:
    if not isinstance(skill, dict):
        return skill
    converted = _pick(
        skill, "id", "name", "description", "tags", "examples", "inputModes", "outputModes"
    )
    if skill.get("security") is not None:
        converted["securityRequirements"] = _requirements(skill["security"])
    return converted


def _capabilities(document: dict[str, Any]) -> dict[str, Any]:
    given = document.get("capabilities")
    capabilities = (
        _pick(given, "streaming", "pushNotifications", "extensions")
        if isinstance(given, dict)
        else {}
    )
    if document.get("supportsAuthenticatedExtendedCard") is not None:
        capabilities["extendedAgentCard"] = document["supportsAuthenticatedExtendedCard"]
    return capabilities


def to_v1(document: dict[str, Any]) -> dict[str, Any]:
    """The v1.0 card document a v0.3 card describes."""
    card = _pick(
        document,
        "name",
        "description",
        "version",
        "provider",
        "documentationUrl",
        "iconUrl",
        "defaultInputModes",
        "defaultOutputModes",
        "signatures",
    )
    card["supportedInterfaces"] = _interfaces(document)
    card["capabilities"] = _capabilities(document)
    card["skills"] = [_skill(s) for s in document.get("skills") or []]
    if isinstance(document.get("securitySchemes"), dict):
        card["securitySchemes"] = {k: _scheme(v) for k, v in document["securitySchemes"].items()}
    if document.get("security") is not None:
        card["securityRequirements"] = _requirements(document["security"])
    return card


def card_model(document: dict[str, Any]) -> AgentCard:
    """The v1.0 ``AgentCard`` of a card document in either shape (strictly validated)."""
    return AgentCard.model_validate(to_v1(document) if is_v03_card(document) else document)
