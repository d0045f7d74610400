"""The glue: an a2a-sdk request handler and its card, governed by the kit.

:func:`govern` gives the parts to put in the team's own Starlette app; the SDK's card is
read as ours (:func:`~member_kit.guard.upstream.card_of`) and rewritten as the guard
rewrites its upstream's (:func:`~member_kit.guard.card.guarded_card`): interfaces under
``settings.public_base_url``, the delegation Bearer scheme, ``scopes`` by skill, the
receipts extension, signed with the member's key. :func:`serve_member` runs an app as a
process with the guard's flags (``--data-dir``, ``--trust-issuer``, ``--key-file``,
``--grpc-port``, ... and ``GUARD_AUDIT_TOKEN`` / ``GUARD_METRICS_TOKEN``), the first line
on stdout ``NAME listening on URL``, reporting under NAME (its metrics, access logger, log
and limit variables: :mod:`member_kit.telemetry.names`); :func:`govern` alone reports
under ``settings.member_name`` (``guard`` unless set).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from a2a.server.request_handlers import RequestHandler
from a2a.types import a2a_pb2
from google.protobuf import json_format

from member_kit.command import Serve, run_member
from member_kit.guard.app import GuardedParts, guarded_parts
from member_kit.guard.main import build_parser, settings_from
from member_kit.guard.settings import GuardSettings
from member_kit.guard.upstream import card_of
from member_kit.sdk.local import LocalAgent


def govern(
    handler: RequestHandler,
    card: a2a_pb2.AgentCard,
    settings: GuardSettings,
    scopes: Mapping[str, str],
) -> GuardedParts:
    """The routes, lifespan and ``install`` that serve ``handler`` as a governed member
    (``scopes``: the scope a delegation token needs for each skill of ``card``)."""
    ours = card_of(json_format.MessageToDict(card), "the agent's card")
    settings = replace(settings, skill_scopes=dict(scopes))
    return guarded_parts(settings, ours, LocalAgent(handler))


def serve_member(
    name: str, build: Callable[[GuardSettings], Any], argv: Sequence[str] | None = None
) -> None:
    """Run the app ``build`` makes of the settings the command line ``argv`` gives, until
    interrupted (``--help`` lists the flags)."""
    parser = build_parser(
        name, f"{name}: an a2a-sdk agent, a member governed by the kit", upstream=False
    )

    def serve() -> Serve:
        from member_kit.server.app import serve_app

        return functools.partial(serve_app, name, build)

    def named_settings_from(args: Any, environ: Mapping[str, str]) -> GuardSettings:
        return replace(settings_from(args, environ), member_name=name)

    run_member(name, parser, argv, named_settings_from, serve)
