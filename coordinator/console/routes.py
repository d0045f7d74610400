"""The console's routes under ``/console``: pages, the JSON they poll, and their forms.

Every route but the login form and the static files needs a logged-in session
(:meth:`~coordinator.console.guard.Guard.session`), and every POST a matching CSRF token
(:meth:`~coordinator.console.guard.Guard.form`). Each one calls the service facade the
API calls; a refusal of the service (``unknown_run``, ``run_ended``...) is shown with the
API's status and reason, as a page to a browser and as the API's error document to a
script.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from agent_cards.edge.operator_secret import OperatorSecret
from coordinator.console import pages
from coordinator.console.guard import COOKIE, ConsoleRefusal, Guard, token_accepted
from coordinator.console.sessions import Session
from coordinator.console.settings import ConsoleSettings
from coordinator.errors import FederationError, UsageError, describe_validation
from coordinator.service import artifact_content
from coordinator.service.api_requests import (
    CancelRequest,
    RegisterRequest,
    RevokeRequest,
    StrictRequest,
)
from coordinator.service.facade import CoordinatorService
from coordinator.service.http.api_errors import error_response, status_of
from coordinator.service.run_list import RunQuery

PREFIX = "/console"
# Who a cancel from the console is recorded as: the operator logged in with the token.
CONSOLE_OPERATOR = "operator (console)"
STATIC = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
NOTICES = {
    "cancelled": "The run's live branches were cancelled.",
    "revoked": "The run's grants were revoked: each member was told (see the timeline).",
    "approved": "The held card was approved.",
    "refused": "The held card was refused; the registered card stays.",
    "held_again": "The card changed again since it was held: it is held anew, not approved.",
}

Handler = Callable[..., Awaitable[Response]]
Request_ = TypeVar("Request_", bound=StrictRequest)


def environment() -> Environment:
    """Templates shipped in the package; everything they print is escaped (no ``|safe``)."""
    return Environment(
        loader=PackageLoader("coordinator.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


class Pages:
    """Renders a template with what every page needs (prefix, CSRF token, notice)."""

    def __init__(self) -> None:
        self.env = environment()

    def render(
        self,
        request: Request,
        name: str,
        session: Session | None,
        status: int = 200,
        **values: Any,
    ) -> HTMLResponse:
        notice = NOTICES.get(request.query_params.get("done", ""))
        html = self.env.get_template(name).render(
            prefix=PREFIX,
            page=name.rpartition(".")[0],
            csrf=session.csrf if session is not None else "",
            logged_in=session is not None and session.authenticated,
            notice=notice,
            **values,
        )
        return HTMLResponse(html, status_code=status)


def console_router(
    service: CoordinatorService, token: OperatorSecret, guard: Guard, settings: ConsoleSettings
) -> APIRouter:
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    view = Pages()

    def refusal(
        request: Request,
        status: int,
        reason: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> Response:
        # the polled .json documents answer as the API does, whatever the client accepts
        as_page = not request.url.path.endswith(".json")
        if as_page and "text/html" in request.headers.get("accept", ""):
            page = view.render(request, "error.html", None, status, reason=reason, message=message)
            page.headers.update(headers or {})
            return page
        return error_response(status, reason, message, headers)

    def answered(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapper(request: Request, *args: Any, **kwargs: Any) -> Response:
            try:
                return await handler(request, *args, **kwargs)
            except ConsoleRefusal as exc:
                if exc.login:
                    return RedirectResponse(f"{PREFIX}/login", status_code=303)
                return refusal(request, exc.status, exc.reason, str(exc), exc.headers)
            except FederationError as exc:
                return refusal(request, status_of(exc), exc.reason, str(exc))

        return wrapper

    def see(path: str, done: str | None = None) -> RedirectResponse:
        return RedirectResponse(PREFIX + path + (f"?done={done}" if done else ""), 303)

    @router.get("")
    async def root(request: Request) -> Response:
        return see("/runs")

    @router.get("/static/{name}")
    async def static(request: Request, name: str) -> Response:
        if name not in STATIC:
            return error_response(404, "not_found", "no such file")
        body = resources.files("coordinator.console").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name])

    # --- login ----------------------------------------------------------------------------

    @router.get("/login")
    @answered
    async def login_form(request: Request) -> Response:
        session = guard.sessions.find(request.cookies.get(COOKIE))
        if session is not None and session.authenticated:
            return see("/runs")
        return login_page(request, session)

    def login_page(
        request: Request, session: Session | None, status: int = 200, failed: bool = False
    ) -> Response:
        cookie = None
        if session is None:
            cookie, session = guard.sessions.open(authenticated=False)
        response = view.render(request, "login.html", session, status, failed=failed)
        if cookie is not None:
            set_cookie(request, response, cookie)
        return response

    @router.post("/login")
    @answered
    async def login(request: Request) -> Response:
        old = request.cookies.get(COOKIE)
        anonymous = guard.sessions.find(old)
        if anonymous is None:
            raise ConsoleRefusal(403, "csrf_missing", "open the login form first")
        fields = await guard.form(request, anonymous)
        if not token_accepted(guard, request, token, fields.get("token", "")):
            return login_page(request, anonymous, 401, failed=True)
        guard.sessions.close(old)
        cookie, _ = guard.sessions.open(authenticated=True)
        response = see("/runs")
        set_cookie(request, response, cookie)
        return response

    @router.post("/logout")
    @answered
    async def logout(request: Request) -> Response:
        await guard.form(request, guard.session(request))
        guard.sessions.close(request.cookies.get(COOKIE))
        response = see("/login")
        response.delete_cookie(COOKIE, path=PREFIX)
        return response

    # --- runs -----------------------------------------------------------------------------

    def run_query(request: Request) -> RunQuery:
        given = request.query_params
        limit = given.get("limit") or str(pages.PAGE_SIZE)
        if not limit.isdigit():
            raise UsageError("limit must be a whole number", "bad_limit")
        return RunQuery(
            state=given.get("state") or None,
            since=given.get("since") or None,
            limit=int(limit),  # checked against the API's bounds by run_list.page
            cursor=given.get("cursor") or None,
        )

    @router.get("/runs")
    @answered
    async def runs(request: Request) -> Response:
        session = guard.session(request)
        found = await run_in_threadpool(pages.runs_page, service, run_query(request))
        return view.render(request, "runs.html", session, **found)

    @router.get("/runs.json")
    @answered
    async def runs_json(request: Request) -> Response:
        guard.session(request)
        found = await run_in_threadpool(pages.run_rows, service, run_query(request))
        return JSONResponse(found)

    @router.get("/runs/{run_id}")
    @answered
    async def run(request: Request, run_id: str) -> Response:
        session = guard.session(request)
        found = await run_in_threadpool(pages.run_page, service, settings, run_id)
        return view.render(request, "run.html", session, **found)

    @router.post("/runs/{run_id}/verify")
    @answered
    async def verify_run(request: Request, run_id: str) -> Response:
        session = guard.session(request)
        await guard.form(request, session)
        report = (await run_in_threadpool(service.audit_verify)).model_dump()
        found = await run_in_threadpool(pages.run_page, service, settings, run_id, report)
        return view.render(request, "run.html", session, **found)

    @router.get("/runs/{run_id}/state.json")
    @answered
    async def run_state(request: Request, run_id: str) -> Response:
        guard.session(request)
        document = await run_in_threadpool(service.run, run_id)
        return JSONResponse(pages.run_state(document))

    @router.post("/runs/{run_id}/cancel")
    @answered
    async def cancel(request: Request, run_id: str) -> Response:
        fields = await guard.form(request, guard.session(request))
        body = checked(CancelRequest, {"reason": fields.get("reason", "").strip() or None})
        await service.cancel(run_id, body.reason, CONSOLE_OPERATOR)
        return see(f"/runs/{run_id}", "cancelled")

    @router.post("/runs/{run_id}/revoke")
    @answered
    async def revoke(request: Request, run_id: str) -> Response:
        fields = await guard.form(request, guard.session(request))
        reason = fields.get("reason", "").strip() or None
        body = checked(RevokeRequest, {"target": run_id, "reason": reason})
        await service.revoke(body.target, body.reason, CONSOLE_OPERATOR)
        return see(f"/runs/{run_id}", "revoked")

    @router.post("/runs/{run_id}/proof")
    @answered
    async def proof(request: Request, run_id: str) -> Response:
        await guard.form(request, guard.session(request))
        bundle = await run_in_threadpool(service.audit_prove, run_id)
        return download(bundle, f"{run_id}.proof.json")

    @router.get("/runs/{run_id}/export")
    @answered
    async def export(request: Request, run_id: str) -> Response:
        guard.session(request)
        bundle = await run_in_threadpool(service.audit_export, run_id)
        return download(bundle, f"{run_id}.bundle.json")

    @router.get("/runs/{run_id}/artifacts/{number}")
    @answered
    async def artifact(request: Request, run_id: str, number: int) -> Response:
        """The artifact whole, exactly as kept (its hash checked), as a plain-text file."""
        guard.session(request)
        text = await run_in_threadpool(service.artifact, run_id, number)
        return artifact_content.plain_text(text, artifact_content.file_name(run_id, number))

    # --- agents ---------------------------------------------------------------------------

    @router.get("/agents")
    @answered
    async def agents(request: Request) -> Response:
        session = guard.session(request)
        found = await run_in_threadpool(pages.agents_page, service)
        return view.render(request, "agents.html", session, **found)

    @router.post("/agents/{name}/approve")
    @answered
    async def approve(request: Request, name: str) -> Response:
        await guard.form(request, guard.session(request))
        held = (await run_in_threadpool(service.agent_detail, name)).pending
        if held is None:
            raise ConsoleRefusal(409, "no_pending_card", f"no card is held for {name!r}")
        answer = await service.register(RegisterRequest(url=held.card_url, name=name, approve=True))
        return see("/agents", "approved" if answer.status == "approved" else "held_again")

    @router.post("/agents/{name}/refuse")
    @answered
    async def refuse(request: Request, name: str) -> Response:
        await guard.form(request, guard.session(request))
        await run_in_threadpool(service.refuse_pending, name)
        return see("/agents", "refused")

    # --- audit ----------------------------------------------------------------------------

    @router.get("/audit")
    @answered
    async def audit(request: Request) -> Response:
        session = guard.session(request)
        found = await run_in_threadpool(pages.audit_page, service, None)
        return view.render(request, "audit.html", session, **found)

    @router.post("/audit/verify")
    @answered
    async def verify(request: Request) -> Response:
        session = guard.session(request)
        await guard.form(request, session)
        report = (await run_in_threadpool(service.audit_verify)).model_dump()
        found = await run_in_threadpool(pages.audit_page, service, report)
        return view.render(request, "audit.html", session, **found)

    return router


def checked(model: type[Request_], values: dict[str, Any]) -> Request_:
    """A form's fields as the API's request document, by the API's own rules."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ConsoleRefusal(422, "invalid_request", describe_validation(exc)) from None


def set_cookie(request: Request, response: Response, value: str) -> None:
    response.set_cookie(
        COOKIE,
        value,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.scope.get("scheme") == "https",  # as uvicorn (or proxy headers) set it
    )


def download(document: dict[str, Any], filename: str) -> Response:
    body = json.dumps(document, indent=2, ensure_ascii=False).encode()
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    return Response(body, media_type="application/json", headers=headers)
