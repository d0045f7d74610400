"""The console's guards over plain HTTP, against the same real deployment: no session,
no page; no CSRF token, no change; every answer with the strict headers; the session
cookie's flags; logging in and out; refusing a held card."""

from __future__ import annotations

import re

import httpx
import pytest

from coordinator.console.guard import CSP
from tests.console.conftest import TOKEN, Deployment

HTML = {"Accept": "text/html"}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found is not None, page.text
    return found.group(1)


def logged_in(deployment: Deployment) -> tuple[httpx.Client, str]:
    """A client with a console session (through the login form) and its CSRF token."""
    client = httpx.Client(base_url=deployment.console, headers=HTML, timeout=30)
    form = client.get("/login")
    answer = client.post("/login", data={"csrf": csrf_of(form), "token": TOKEN})
    assert answer.status_code == 303 and answer.headers["location"] == "/console/runs"
    return client, csrf_of(client.get("/runs"))


@pytest.fixture
def operator(deployment: Deployment) -> httpx.Client:
    client, csrf = logged_in(deployment)
    client.csrf = csrf  # type: ignore[attr-defined]
    return client


def test_requests_without_a_session_are_refused(deployment: Deployment) -> None:
    """Pages redirect to the login form; scripts and forms get 401; a made-up cookie is
    no session."""
    anonymous = httpx.Client(base_url=deployment.console, timeout=30)
    page = anonymous.get("/runs", headers=HTML)
    assert page.status_code == 303 and page.headers["location"] == "/console/login"
    polled = anonymous.get("/runs.json", headers=HTML)  # a polled document: never a redirect
    assert polled.status_code == 401 and polled.json()["error"]["reason"] == "session_missing"
    run_id = deployment.cases["ok"]["run_id"]
    for path in (f"/runs/{run_id}/cancel", "/agents/hostile-b/approve", "/audit/verify"):
        refused = anonymous.post(path, data={"csrf": "x"})
        assert refused.status_code == 401, path
    forged = httpx.get(
        deployment.console + "/agents", headers=HTML, cookies={"federation_console": "made-up"}
    )
    assert forged.status_code == 303
    # the API is not opened by a console cookie: it still wants the bearer token
    operator, _ = logged_in(deployment)
    api = httpx.get(deployment.url + "/v1/runs", cookies=operator.cookies, timeout=30)
    assert api.status_code == 401


def test_a_state_changing_post_without_the_csrf_token_is_refused(
    deployment: Deployment, operator: httpx.Client
) -> None:
    """403 with the reason, and nothing changes: the live run stays live."""
    run_id = deployment.submit_slow_run()
    missing = operator.post(f"/runs/{run_id}/cancel", data={"reason": "no token"})
    assert missing.status_code == 403
    assert "csrf_missing" in missing.text
    wrong = operator.post(
        f"/runs/{run_id}/cancel", data={"csrf": "not-this-sessions"}, headers={"Accept": "*/*"}
    )
    assert wrong.status_code == 403 and wrong.json()["error"]["reason"] == "csrf_invalid"
    _, other_csrf = logged_in(deployment)  # another session's token is not this one's
    crossed = operator.post(f"/runs/{run_id}/cancel", data={"csrf": other_csrf})
    assert crossed.status_code == 403
    too_long = {"csrf": operator.csrf, "reason": "x" * 501}  # type: ignore[attr-defined]
    refused = operator.post(f"/runs/{run_id}/cancel", data=too_long)
    assert refused.status_code == 422 and "invalid_request" in refused.text
    assert deployment.http.get(f"/v1/runs/{run_id}").json()["cancelled"] is False
    done = operator.post(f"/runs/{run_id}/cancel", data={"csrf": operator.csrf})  # type: ignore[attr-defined]
    assert done.status_code == 303
    assert deployment.http.get(f"/v1/runs/{run_id}").json()["cancelled"] is True
    again = operator.post(f"/runs/{run_id}/cancel", data={"csrf": operator.csrf})  # type: ignore[attr-defined]
    assert again.status_code in (303, 409)


def test_a_run_is_revoked_from_the_console(deployment: Deployment, operator: httpx.Client) -> None:
    """The run page's revoke form: CSRF-checked like every post; the run's grants are
    revoked (a ledger event, each member pushed) and its live branches cancelled."""
    run_id = deployment.submit_slow_run()
    missing = operator.post(f"/runs/{run_id}/revoke", data={"reason": "no token"})
    assert missing.status_code == 403 and "csrf_missing" in missing.text
    assert deployment.http.get(f"/v1/runs/{run_id}").json()["cancelled"] is False
    form = {"csrf": operator.csrf, "reason": "key leaked"}  # type: ignore[attr-defined]
    done = operator.post(f"/runs/{run_id}/revoke", data=form)
    assert done.status_code == 303 and done.headers["location"].endswith("done=revoked")
    assert deployment.http.get(f"/v1/runs/{run_id}").json()["cancelled"] is True
    shown = deployment.http.get(f"/v1/audit/runs/{run_id}/export").text
    assert "grant.revoked" in shown and "key leaked" in shown


def test_every_console_answer_carries_the_strict_headers(
    deployment: Deployment, operator: httpx.Client
) -> None:
    anonymous = httpx.Client(base_url=deployment.console, timeout=30)
    answers = [
        anonymous.get("/login"),
        anonymous.get("/runs.json"),
        anonymous.get("/static/console.js"),
        anonymous.get("/static/nothing.js"),
        operator.get("/runs"),
        operator.get("/runs/run-unknown"),
        operator.post("/audit/verify", data={}),
    ]
    assert [a.status_code for a in answers] == [200, 401, 200, 404, 200, 404, 403]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["cache-control"] == "no-store"
    assert "unknown_run" in answers[5].text
    assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP


def test_the_session_cookie_and_logging_in_and_out(deployment: Deployment) -> None:
    client = httpx.Client(base_url=deployment.console, headers=HTML, timeout=30)
    form = client.get("/login")
    anonymous = client.cookies["federation_console"]
    wrong = client.post("/login", data={"csrf": csrf_of(form), "token": "x" * 20})
    assert wrong.status_code == 401 and "not the operator token" in wrong.text
    no_form = client.post("/login", data={"token": TOKEN})
    assert no_form.status_code == 403
    answer = client.post("/login", data={"csrf": csrf_of(form), "token": TOKEN})
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback; set when served over TLS
    session = client.cookies["federation_console"]
    assert session != anonymous  # a new session id once logged in
    stale = httpx.get(deployment.console + "/runs", cookies={"federation_console": anonymous})
    assert stale.status_code in (303, 401)
    csrf = csrf_of(client.get("/runs"))
    out = client.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    after = httpx.get(
        deployment.console + "/runs", headers=HTML, cookies={"federation_console": session}
    )
    assert after.status_code == 303


def test_a_held_card_is_refused_from_the_console(
    deployment: Deployment, operator: httpx.Client
) -> None:
    """The held card is dropped, the registered one stays; refusing twice is 409."""
    before = deployment.http.get("/v1/agents/hostile-b").json()
    assert before["pending"] is not None
    csrf = operator.csrf  # type: ignore[attr-defined]
    answer = operator.post("/agents/hostile-b/refuse", data={"csrf": csrf})
    assert answer.status_code == 303 and answer.headers["location"].endswith("done=refused")
    after = deployment.http.get("/v1/agents/hostile-b").json()
    assert after["pending"] is None and after["version"] == before["version"] == "1.0.0"
    again = operator.post("/agents/hostile-b/refuse", data={"csrf": csrf})
    assert again.status_code == 409 and "no_pending_card" in again.text


def test_runs_are_paged_with_the_apis_cursor(
    deployment: Deployment, operator: httpx.Client
) -> None:
    """Two at a time, newest first, each page's cursor leading to the next, as the API
    pages them; the page's own link to older runs carries that cursor."""
    listed = deployment.http.get("/v1/runs", params={"limit": 500}).json()["runs"]
    seen: list[str] = []
    cursor = ""
    while True:
        page = operator.get("/runs.json", params={"limit": 2, "cursor": cursor}).json()
        assert len(page["runs"]) <= 2
        seen += [run["run_id"] for run in page["runs"]]
        if page["next_cursor"] is None:
            break
        html = operator.get("/runs", params={"limit": 2, "cursor": cursor}).text
        assert f"cursor={page['next_cursor']}&amp;limit=2" in html
        cursor = page["next_cursor"]
    assert seen == [run["run_id"] for run in listed]
    assert operator.get("/runs.json", params={"limit": "x"}).status_code == 422
    assert operator.get("/runs.json", params={"limit": "501"}).json()["error"]["reason"] == (
        "bad_limit"
    )
    bad = operator.get("/runs", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422 and "bad_cursor" in bad.text
