"""The console as an extension of the coordinator's app: ``federation serve coordinator``
installs it at ``/console`` (see :class:`~coordinator.service.http.api.AppExtension`)."""

from __future__ import annotations

from fastapi import FastAPI

from agent_cards.edge.operator_secret import OperatorSecret
from coordinator.console.guard import Guard, SecurityHeaders
from coordinator.console.routes import PREFIX, console_router
from coordinator.console.sessions import SessionStore
from coordinator.console.settings import load_console_settings
from coordinator.service.facade import CoordinatorService


class Console:
    """The operator console: pages over the same service the API calls, behind a login
    with the operator token."""

    prefix = PREFIX

    def install(self, app: FastAPI, service: CoordinatorService, token: OperatorSecret) -> None:
        settings = load_console_settings()
        sessions = SessionStore(
            lifetime=settings.console_session_seconds, idle=settings.console_idle_seconds
        )
        app.include_router(console_router(service, token, Guard(sessions), settings))
        app.add_middleware(SecurityHeaders, prefix=PREFIX)
