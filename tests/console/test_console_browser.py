"""The console in a real browser (Debian's Chromium through Playwright) against a real
coordinator and remote_risk: log in, the demo's runs, a run's lanes and refused artifact,
a live run cancelled from its page, a held card approved, remote markup shown as text,
the audit verified. Each page is checked with axe-core (no serious or critical
violation) and photographed."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import REQUIRED, TOKEN, TRACE_TEMPLATE, Deployment
from tests.console.peer import LONG_TAIL, MARKUP

if not REQUIRED:
    pytest.importorskip("playwright", reason="playwright is a test dependency (.[test])")
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Dialog, Page, Route, expect

# What each demo case's run ends as (the runs list's state column).
DEMO_STATES = {
    "ok": "ACCEPTED",
    "missing": "CANCELLED",
    "failure": "FAILED",
    "conflict": "ACCEPTED",
    "handoff": "ACCEPTED",
}
SERIOUS = {"serious", "critical"}
POLL_SECONDS = 1.5  # console.js POLL_MS
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
def session(browser: Any, deployment: Deployment) -> Iterator[Any]:
    """One browser context for the module, logged in once through the form."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    page.goto(deployment.console + "/runs")
    expect(page).to_have_url(deployment.console + "/login")
    page.fill("#token", TOKEN)
    page.click("form.login button")
    expect(page).to_have_url(deployment.console + "/runs")
    page.close()
    yield context
    context.close()


@pytest.fixture
def page(session: Any) -> Iterator[Page]:
    opened: Page = session.new_page()
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", dismiss)
    opened.dialogs = dialogs  # type: ignore[attr-defined]
    yield opened
    opened.close()


def accessible(page: Page, screenshots: Path, name: str) -> None:
    """No serious or critical axe-core violation; a screenshot of the page as checked."""
    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)
    violations = Axe().run(page).response["violations"]
    serious = [(v["id"], v["impact"], v["help"]) for v in violations if v["impact"] in SERIOUS]
    assert serious == [], serious


def test_login_refuses_a_wrong_token(
    browser: Any, deployment: Deployment, screenshots: Path
) -> None:
    """The form says the token is wrong and gives no session."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(deployment.console + "/login")
    accessible(page, screenshots, "login")
    page.fill("#token", "not-the-operator-token-at-all")
    page.click("form.login button")
    expect(page.locator(".error")).to_contain_text("not the operator token")
    accessible(page, screenshots, "login-refused")
    page.goto(deployment.console + "/agents")
    expect(page).to_have_url(deployment.console + "/login")
    context.close()


def test_the_demo_cases_are_listed_with_their_states(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    page.goto(deployment.console + "/runs")
    for case, state in DEMO_STATES.items():
        row = page.locator(f'tr[data-run="{deployment.cases[case]["run_id"]}"]')
        expect(row.locator("td").nth(2)).to_have_text(state)
        expect(row.locator("td").nth(1)).to_have_text("pilot")
    accessible(page, screenshots, "runs")
    page.select_option("#state", "FAILED")
    page.click("form.filters button")
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run", deployment.cases["failure"]["run_id"])


def test_a_run_page_shows_its_lanes_and_the_refused_artifact(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    handoff = deployment.cases["handoff"]
    page.goto(f"{deployment.console}/runs/{handoff['run_id']}")
    lanes = page.locator("table.timeline thead th.lane")
    expect(lanes).to_have_text(["coordinator", "operations", "remote-risk", "privacy"])
    expect(page.locator("td.arrow-out").first).to_contain_text("message.dispatched")
    # the first state the remote answered: SUBMITTED when the task was followed, or the
    # settled state at once when the skill was sent blocking
    # (coordinator.dispatch.attempt.send_modes)
    first_answer = page.locator("td.arrow-in").first
    expect(first_answer).to_contain_text(re.compile(r"from remote-risk: TASK_STATE_[A-Z]+"))
    trace = handoff["trace_id"]
    expect(page.locator("#trace")).to_have_attribute(
        "href", TRACE_TEMPLATE.replace("{trace_id}", trace)
    )
    page.click("#main >> text=Verify the ledger")
    expect(page.locator("#audit-state")).to_contain_text("Verified")
    expect(page.locator("#trace")).to_contain_text(trace)
    accessible(page, screenshots, "run-handoff")

    page.goto(f"{deployment.console}/runs/{deployment.refused_run}")
    expect(page.locator("table.timeline thead th.lane")).to_have_text(["coordinator", "hostile"])
    artifact = page.locator("article.artifact")
    expect(artifact.locator(".verdict")).to_have_text("rejected")
    expect(artifact.locator(".artifact-reason")).to_have_text("media_type_not_allowed: text/plain")
    expect(page.locator("#run-state")).to_have_text("REJECTED")
    accessible(page, screenshots, "run-refused")

    missing = page.goto(f"{deployment.console}/runs/run-000000000000")
    assert missing is not None and missing.status == 404
    expect(page.locator("h1")).to_contain_text("unknown_run")
    accessible(page, screenshots, "error")


def no_markup_ran(page: Page) -> None:
    """Nothing the remote sent became an element or ran: only our own script is on the
    page, no image, no flag set, no dialog opened."""
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("script").count() == 1
    assert page.locator("script").first.get_attribute("src") == "/console/static/console.js"
    assert page.locator("img").count() == 0
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_markup_from_a_remote_is_shown_as_text(page: Page, deployment: Deployment) -> None:
    """An artifact and a card description full of <script> and <img onerror> render as
    the text they are, and none of it runs."""
    response = page.goto(f"{deployment.console}/runs/{deployment.refused_run}")
    assert response is not None
    assert "script-src 'self'" in response.headers["content-security-policy"]
    content = page.locator("article.artifact pre.content")
    expect(content).to_contain_text('<script>window.__pwned = "script"')
    expect(content).to_contain_text(f"text: {MARKUP}")
    page.wait_for_timeout(300)
    no_markup_ran(page)

    page.goto(deployment.console + "/agents")
    description = page.locator("#agent-hostile-b .description")
    expect(description).to_have_text(f"A peer whose card says {MARKUP} in its description.")
    page.wait_for_timeout(300)
    no_markup_ran(page)


def answered_after_two_polls(route: Route) -> None:
    """The form's POST reaches the coordinator now; its answer reaches the page later."""
    answer = route.fetch(max_redirects=0)
    time.sleep(2 * POLL_SECONDS + 0.5)
    route.fulfill(response=answer)


def test_a_live_run_updates_and_is_cancelled_from_its_page(
    session: Any, page: Page, deployment: Deployment, screenshots: Path
) -> None:
    """The runs list shows a new live run and its end without a reload; the run's page
    follows it and cancels it; the remote's own task ends CANCELED."""
    page.goto(deployment.console + "/runs")
    page.evaluate("window.__not_reloaded = true")
    run_id = deployment.submit_slow_run()
    listed = page.locator(f'tr[data-run="{run_id}"] td').nth(2)
    expect(listed).to_have_text("live")

    run_page = session.new_page()
    run_page.goto(f"{deployment.console}/runs/{run_id}")
    branch = run_page.locator("table.ownership tbody tr").first
    expect(branch.locator('[data-field="remote_state"]')).to_have_text("TASK_STATE_WORKING")
    expect(branch.locator('[data-field="state"]')).to_have_text("RUNNING")
    accessible(run_page, screenshots, "run-live")
    run_page.fill("#reason", "opened by mistake")
    # The cancel is stored before any remote is told, so the page's poll sees the run end
    # while the form's answer is still on its way; held here for two polls to be sure.
    run_page.route("**/cancel", answered_after_two_polls)
    run_page.click("form.cancel button")
    # The form is answered once the remote has answered CancelTask: on a loaded machine
    # that can take longer than a page takes to change.
    expect(run_page.locator(".notice")).to_contain_text("cancelled", timeout=60_000)
    expect(run_page.locator("#run-state")).to_have_text("cancelled")
    expect(branch.locator('[data-field="state"]')).to_have_text("CANCELLED")
    expect(branch.locator('[data-field="remote_state"]')).to_have_text("TASK_STATE_CANCELED")
    expect(run_page.locator("form.cancel")).to_have_count(0)
    task_id = branch.locator("td").nth(5).inner_text()
    assert deployment.remote_task_state(task_id) == "TASK_STATE_CANCELED"
    document = deployment.http.get(f"/v1/runs/{run_id}").json()
    assert document["cancellation"]["by"] == "operator (console)"
    assert document["cancellation"]["reason"] == "opened by mistake"
    run_page.screenshot(path=str(screenshots / "run-cancelled.png"), full_page=True)
    run_page.close()

    expect(listed).to_have_text("cancelled")
    assert page.evaluate("window.__not_reloaded") is True


def test_a_download_leaves_a_live_runs_page_following_the_run(
    session: Any, deployment: Deployment
) -> None:
    """The proof bundle of a live run is downloaded from its page; the run is then
    cancelled elsewhere (the API), and the page still follows it to its end and shows
    the whole page anew, as it does when no form was used."""
    run_id = deployment.submit_slow_run()
    run_page = session.new_page()
    run_page.goto(f"{deployment.console}/runs/{run_id}")
    branch = run_page.locator("table.ownership tbody tr").first
    expect(branch.locator('[data-field="remote_state"]')).to_have_text("TASK_STATE_WORKING")
    with run_page.expect_download() as download:
        run_page.click("text=Download the proof bundle")
    assert json.loads(Path(download.value.path()).read_text())["format"]
    cancelled = deployment.http.post(f"/v1/runs/{run_id}/cancel", json={"reason": "elsewhere"})
    assert cancelled.status_code == 200, cancelled.text
    expect(run_page.locator("#run-state")).to_have_text("cancelled")
    expect(run_page.locator("form.cancel")).to_have_count(0)  # the page was shown anew
    run_page.close()


def test_a_held_cards_diff_is_shown_and_approved(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    page.goto(deployment.console + "/agents")
    agent = page.locator("#agent-hostile")
    expect(agent.locator(".badge")).to_have_text("card held for approval")
    diff = agent.locator("ul.diff li")
    expect(diff).to_contain_text(["+ skill pay", "+ scope payments:write (skill pay)"])
    expect(agent).to_contain_text("version 1.0.0 (held: version 2.0.0)")
    accessible(page, screenshots, "agents")
    agent.locator("button", has_text="Approve").click()
    expect(page.locator(".notice")).to_have_text("The held card was approved.")
    expect(page.locator("#agent-hostile .badge")).to_have_count(0)
    detail = deployment.http.get("/v1/agents/hostile").json()
    assert detail["pending"] is None and detail["version"] == "2.0.0"
    assert "pay" in detail["skills"]


def test_the_audit_page_verifies_and_exports(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    page.goto(deployment.console + "/audit")
    page.click("text=Verify the ledger")
    expect(page.locator("#verify-result")).to_contain_text("Intact")
    accessible(page, screenshots, "audit")
    run_id = deployment.cases["ok"]["run_id"]
    with page.expect_download() as download:
        page.click(f"a[href$='/runs/{run_id}/export']")
    bundle = json.loads(Path(download.value.path()).read_text())
    verified = deployment.http.post("/v1/audit/verify", json={"bundle": bundle}).json()
    assert verified["ok"] is True, verified

    page.goto(f"{deployment.console}/runs/{run_id}")
    with page.expect_download() as download:
        page.click("text=Download the proof bundle")
    proof = json.loads(Path(download.value.path()).read_text())
    verified = deployment.http.post("/v1/audit/verify", json={"bundle": proof}).json()
    assert verified["ok"] is True, verified


def in_view(page: Page, selector: str) -> bool:
    """The element's box lies wholly inside the window and inside every box that clips it
    (an ancestor whose overflow is not visible): it can be seen without scrolling."""
    return bool(
        page.eval_on_selector(
            selector,
            """element => {
                const box = element.getBoundingClientRect();
                if (box.width === 0 || box.left < 0 || box.right > window.innerWidth) return false;
                for (let up = element.parentElement; up; up = up.parentElement) {
                    if (getComputedStyle(up).overflowX === "visible") continue;
                    const clip = up.getBoundingClientRect();
                    if (box.left < clip.left - 0.5 || box.right > clip.right + 0.5) return false;
                }
                return true;
            }""",
        )
    )


@pytest.mark.parametrize("width", [1920, 1360])
def test_every_lane_of_the_timeline_fits_a_wide_window(
    session: Any, deployment: Deployment, width: int
) -> None:
    """The handoff run's four lanes are all in view, none clipped by the page's width."""
    page = session.new_page()
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(f"{deployment.console}/runs/{deployment.cases['handoff']['run_id']}")
    expect(page.locator("table.timeline thead th.lane")).to_have_count(4)
    assert in_view(page, "table.timeline thead th.lane:nth-of-type(4)")
    assert in_view(page, "table.timeline thead th.lane:last-child")
    page.close()


def test_log_out_is_in_view_on_a_phone(session: Any, deployment: Deployment) -> None:
    """At 390 px the bar wraps: Log out stays on the screen, and no page scrolls sideways."""
    page = session.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/runs", "/agents", "/audit", f"/runs/{deployment.cases['handoff']['run_id']}"):
        page.goto(deployment.console + path)
        expect(page.locator("form.logout button")).to_be_visible()
        assert in_view(page, "form.logout button"), path
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
    page.close()


def test_a_receipt_in_the_timeline_is_shown_decoded(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    """The remote's signed receipt, carried by the verdict on its return, reads as its
    fields and whether it verifies with the key pinned for the agent, not as base64."""
    page.goto(f"{deployment.console}/runs/{deployment.cases['ok']['run_id']}")
    receipt = page.locator("table.timeline tbody tr", has_text="artifact.admitted").first
    fields = receipt.locator("dl.receipt")
    expect(fields).to_contain_text("task_id")
    expect(fields).to_contain_text("artifact_digest")
    expect(fields).to_contain_text("TASK_STATE_COMPLETED")
    expect(receipt.locator(".receipt-verdict")).to_contain_text("verified with the key pinned")
    expect(receipt).not_to_contain_text('"protected"')
    expect(receipt).not_to_contain_text("eyJ")
    accessible(page, screenshots, "run-receipt")


def test_an_admitted_artifact_is_shown_as_untrusted_text(
    page: Page, deployment: Deployment, screenshots: Path
) -> None:
    """A hostile artifact that was admitted is shown, marked untrusted, as inert text:
    no script, no link, control and bidirectional characters as escapes, the long tail
    cut with a link to the whole, which is served as plain text never sniffed."""
    run_id = deployment.admitted_run
    page.goto(f"{deployment.console}/runs/{run_id}")
    artifact = page.locator("article.artifact.decision-admitted")
    expect(artifact.locator(".untrusted-label")).to_contain_text("untrusted")
    content = artifact.locator("pre.content")
    # a data part is shown as JSON: its quotes and C0 controls escaped as JSON escapes them
    expect(content).to_contain_text('<script>window.__pwned = \\"script\\"')
    expect(content).to_contain_text("javascript:alert(3)")
    expect(content).to_contain_text("escape\\u001b[31mred")
    expect(content).to_contain_text("nul\\u0000 del\\x7f")
    expect(content).to_contain_text("invoice \\u202efdp.exe\\u202c done")
    expect(content).to_contain_text("(cut to fit)")
    assert content.locator("a").count() == 0
    assert "\u202e" not in content.inner_text()
    page.wait_for_timeout(300)
    no_markup_ran(page)
    accessible(page, screenshots, "run-admitted")

    whole = artifact.locator("a.whole")
    expect(whole).to_have_attribute("href", f"/console/runs/{run_id}/artifacts/1")
    answer = page.request.get(deployment.url + str(whole.get_attribute("href")))
    assert answer.status == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.headers["x-content-type-options"] == "nosniff"
    body = answer.body()
    document = deployment.http.get(f"/v1/runs/{run_id}").json()
    assert document["artifacts"][0]["content_hash"] == "sha256:" + sha256(body).hexdigest()
    assert LONG_TAIL.encode() in body
