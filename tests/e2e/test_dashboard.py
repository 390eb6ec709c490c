"""The dashboard (`GET /`) in a real headless browser against the whole stack: whatever a run or a schedule
holds is shown as text, never run as HTML; the token is never stored; the API's errors are shown as text.

Playwright drives the system's Chromium (deploy/dev.sh installs it; Playwright cannot download its own here).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from tests.e2e.conftest import API_TOKENS, Stack, agent, agent_run, hook
from tests.e2e.test_schedules import schedule
from tests.waiting import wait_for

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")
OTHER = next(t for t, who in API_TOKENS.items() if who == "bob@example.com")
# Each would set window.__xss if it ever reached the page as HTML.
IMG = '<img src=x onerror="window.__xss=1">'
SVG = '<svg onload="window.__xss=2"></svg>'
WAIT_MS = 30_000

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM} (deploy/dev.sh installs chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh context (no cookies or storage from another test) that records every CSP violation."""
    context = browser.new_context()
    context.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                            "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
    try:
        yield context.new_page()
    finally:
        context.close()


def open_dashboard(page: Page, base: str, namespace: str) -> dict[str, str]:
    """Opens the dashboard, enters the namespace and the token; returns the page's response headers."""
    response = page.goto(base + "/")
    assert response is not None and response.status == 200
    page.fill("#ns", namespace)
    page.fill("#token", TOKEN)
    page.click("#refresh")
    return response.all_headers()


def row(page: Page, table: str, name: str) -> Locator:
    """The row of `table` (#rows or #schedules) whose first cell is `name`."""
    return page.locator(f"{table} tr").filter(has=page.locator("td:first-child", has_text=name))


def assert_nothing_ran(page: Page) -> None:
    assert page.locator("#rows img, #rows svg, #schedules img, #schedules svg").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.evaluate("window.__csp") == []  # nothing the page does needs more than its policy allows
    assert page.evaluate("[localStorage.length, sessionStorage.length]") == [0, 0]


def test_html_in_a_run_or_a_schedule_is_shown_as_text(stack: Stack, api_server: str, namespace: str,
                                                      page: Page) -> None:
    stack.create(namespace, "agentruns", agent_run("hostile", agent_ref=IMG))
    # Straight to Kubernetes (the API would refuse these names): a time zone that is HTML puts the schedule in
    # phase Error with a message that quotes it, and "Run now" is then refused with a detail that quotes it too.
    stack.create(namespace, "sympoziumschedules", schedule("hostile-schedule", "@every 1h", agentRef=IMG,
                                                           timezone=SVG, firstTick="afterInterval"))
    headers = open_dashboard(page, api_server, namespace)
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"

    run = row(page, "#rows", "hostile")
    expect(run).to_have_count(1, timeout=WAIT_MS)
    expect(run.locator("td").nth(1)).to_have_text(IMG)
    sched = row(page, "#schedules", "hostile-schedule")
    expect(sched).to_have_count(1, timeout=WAIT_MS)
    expect(sched.locator("td").nth(1)).to_have_text(IMG)
    expect(sched.locator("td").nth(2)).to_have_text(f"@every 1h {SVG}")
    # The bridge refuses the time zone; the dashboard's 5s refresh shows it.
    def error_message() -> str | None:
        obj = cast(dict[str, Any], stack.custom.get_namespaced_custom_object(
            "sympozium.ai", "v1alpha1", namespace, "sympoziumschedules", "hostile-schedule"))
        st = obj.get("status") or {}
        return st.get("message") if st.get("phase") == "Error" else None

    message = wait_for(error_message, timeout=30, what="the schedule's phase Error")
    assert SVG in message
    expect(sched.locator("td").nth(3)).to_have_text("Error", timeout=WAIT_MS)
    expect(sched.locator("td").nth(3)).to_have_attribute("title", message)

    sched.get_by_role("button", name="Run now").click()
    expect(page.locator("#msg")).to_have_text(
        f"hostile-schedule: schedule hostile-schedule is in phase Error: {message}", timeout=WAIT_MS)
    assert_nothing_ran(page)
    assert page.evaluate("document.body.innerHTML").count("<img") == 0


def test_a_refused_verdict_shows_the_apis_detail_as_text(stack: Stack, api_server: str, namespace: str,
                                                         page: Page) -> None:
    stack.create(namespace, "agents", agent())
    gate = hook("gate", "true", gate=True)
    stack.create(namespace, "agentruns", agent_run("gated", lifecycle={"postRun": [gate], "gateTimeout": "10m"}))
    wait_for(lambda: ((stack.get_run(namespace, "gated") or {}).get("status", {}).get("gate") or {})
             .get("state") == "pending", timeout=60, what="the gate to be pending")
    # The page's timers stand still (no 5s refresh): the Approve button stays after another operator decides.
    page.clock.install(time=datetime(2026, 1, 1))
    page.clock.pause_at(datetime(2026, 1, 1, 0, 0, 1))
    open_dashboard(page, api_server, namespace)
    run = row(page, "#rows", "gated")
    expect(run.get_by_role("button", name="Approve")).to_be_visible(timeout=WAIT_MS)

    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {OTHER}"}, timeout=60) as bob:
        decided = bob.post("/api/v1/runs/gated/gate-verdict", params={"namespace": namespace},
                           json={"action": "approve", "reason": "bob"})
        assert decided.status_code == 200, decided.text
        stack.wait_phase(namespace, "gated")
        refused = bob.post("/api/v1/runs/gated/gate-verdict", params={"namespace": namespace},
                           json={"action": "approve"})
    assert refused.status_code == 409
    detail = refused.json()["detail"]

    run.get_by_role("button", name="Approve").click()
    expect(page.locator("#msg")).to_have_text(f"gated: {detail}", timeout=WAIT_MS)
    # The reload after the verdict shows the decided gate, and the message stays.
    expect(run.locator("td").nth(4)).to_have_text("approved", timeout=WAIT_MS)
    expect(run.get_by_role("button")).to_have_count(0)
    expect(page.locator("#msg")).to_have_text(f"gated: {detail}")
    assert_nothing_ran(page)


def test_reject_pause_and_resume_still_work_from_the_dashboard(stack: Stack, api_server: str, namespace: str,
                                                              page: Page) -> None:
    stack.create(namespace, "agents", agent())
    gate = hook("gate", "true", gate=True)
    stack.create(namespace, "agentruns", agent_run("gated", lifecycle={"postRun": [gate], "gateTimeout": "10m"}))
    stack.create(namespace, "sympoziumschedules", schedule("quiet", "@every 1h", firstTick="afterInterval"))
    wait_for(lambda: ((stack.get_run(namespace, "gated") or {}).get("status", {}).get("gate") or {})
             .get("state") == "pending", timeout=60, what="the gate to be pending")
    open_dashboard(page, api_server, namespace)

    # Reject asks for the replacement response (a prompt), then the API records it.
    page.once("dialog", lambda d: d.accept(SVG))
    row(page, "#rows", "gated").get_by_role("button", name="Reject").click()
    expect(page.locator("#msg")).to_have_text("gated: rejected", timeout=WAIT_MS)
    run = stack.wait_phase(namespace, "gated")
    assert run["status"]["gateVerdict"] == "rejected" and run["status"]["gate"]["decidedBy"] == "alice@example.com"

    sched = row(page, "#schedules", "quiet")
    expect(sched.locator("td").nth(3)).to_have_text("Active", timeout=WAIT_MS)
    sched.get_by_role("button", name="Pause").click()
    expect(page.locator("#msg")).to_have_text("quiet: paused", timeout=WAIT_MS)
    expect(sched.get_by_role("button", name="Resume")).to_be_visible(timeout=WAIT_MS)
    sched.get_by_role("button", name="Resume").click()
    expect(page.locator("#msg")).to_have_text("quiet: resumed", timeout=WAIT_MS)
    expect(sched.get_by_role("button", name="Pause")).to_be_visible(timeout=WAIT_MS)
    assert_nothing_ran(page)
