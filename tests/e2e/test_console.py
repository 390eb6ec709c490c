"""The web console (`/`) in a real headless Chromium against the whole stack: sign-in, live runs, the approval badge
and toast, approve and reject from a run's page with their banners, logs, the Temporal link, create and delete,
what a run holds shown as text only, CSRF, and no token anywhere in the browser.

Playwright drives the system's Chromium (deploy/dev.sh installs it; Playwright cannot download its own here). One
signed-in browser context serves the module (each test in its own namespace); screenshots go under the test's
tmp directory and /tmp/console-shots/.
"""

from __future__ import annotations

import html
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Page, expect, sync_playwright

from tests.e2e.conftest import API_TOKENS, TEMPORAL_UI, Stack, agent, agent_run, hook
from tests.waiting import wait_for
from workflows.gate import FINISHED

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")
OTHER = next(t for t, who in API_TOKENS.items() if who == "bob@example.com")
HOSTILE = "<img src=x onerror=alert(1)>"
WAIT_MS = 30_000
SHOTS = Path("/tmp/console-shots")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM} (deploy/dev.sh installs chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield b
        finally:
            b.close()


def new_context(browser: Browser) -> BrowserContext:
    """A context that records every CSP violation and every dialog (an alert() would be one)."""
    context = browser.new_context(viewport={"width": 1366, "height": 860})
    context.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', "
                            "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
    return context


def sign_in(page: Page, base: str, path: str = "/runs") -> None:
    page.goto(base + path)
    expect(page).to_have_url(f"{base}/signin?next=%2Fruns", timeout=WAIT_MS)
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#me")).to_have_text("alice@example.com", timeout=WAIT_MS)


@pytest.fixture(scope="module")
def console(browser: Browser, api_server: str) -> Iterator[BrowserContext]:
    """One signed-in context for the module's tests."""
    context = new_context(browser)
    page = context.new_page()
    sign_in(page, api_server)
    page.close()
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(console: BrowserContext) -> Iterator[Page]:
    p = console.new_page()
    dialogs: list[str] = []

    def dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        d.dismiss()

    p.on("dialog", dialog)
    p.dialogs = dialogs  # type: ignore[attr-defined]
    try:
        yield p
    finally:
        p.close()


def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(path, SHOTS / name)


def assert_no_storage(page: Page) -> None:
    """Nothing in localStorage; in sessionStorage only the page's own path, which htmx keeps there (its history
    cache is off)."""
    stored = page.evaluate("[Object.entries(localStorage), Object.entries(sessionStorage)]")
    assert stored[0] == []
    assert [k for k, _v in stored[1]] in ([], ["htmx-current-path-for-history"])
    assert all(TOKEN not in v for _k, v in stored[1])


def assert_clean(page: Page) -> None:
    """Nothing ran that the page did not ship, nothing needed more than its policy, nothing is stored."""
    assert page.dialogs == []  # type: ignore[attr-defined]
    assert page.evaluate("window.__csp") == []
    assert_no_storage(page)
    assert page.locator("main img, main svg").count() == 0


def gated(name: str, **spec: Any) -> dict[str, Any]:
    gate = hook("gate", "true", gate=True)
    return agent_run(name, lifecycle={"postRun": [gate], "gateTimeout": "10m", **spec.pop("lifecycle", {})}, **spec)


def wait_gate(stack: Stack, namespace: str, name: str) -> None:
    wait_for(lambda: ((stack.get_run(namespace, name) or {}).get("status", {}).get("gate") or {})
             .get("state") == "pending", timeout=60, what=f"the gate of {name} to be pending")


def open_waiting(stack: Stack, api_server: str, namespace: str, page: Page, name: str, **spec: Any) -> None:
    """The page of a new gated run of a new Agent, once its gate waits for a verdict."""
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", gated(name, **spec))
    wait_gate(stack, namespace, name)
    page.goto(f"{api_server}/runs/{name}?namespace={namespace}")


def test_sign_in_keeps_the_token_out_of_the_browser(browser: Browser, api_server: str) -> None:
    context = new_context(browser)
    try:
        page = context.new_page()
        response = page.goto(api_server + "/signin")
        assert response is not None
        headers = response.all_headers()
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
        page.get_by_label("API token").fill("not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_have_text("That is not a valid API token.")
        sign_in(page, api_server)
        cookies = context.cookies()
        assert [c["name"] for c in cookies] == ["agentrun_session"]
        session = cookies[0]
        assert session["httpOnly"] and session["sameSite"] == "Strict" and TOKEN not in session["value"]
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        assert_no_storage(page)
        assert TOKEN not in page.content()
        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(api_server + "/signin")
        assert context.cookies() == []
        page.goto(api_server + "/runs")
        expect(page).to_have_url(f"{api_server}/signin?next=%2Fruns")
        assert page.evaluate("window.__csp") == []
    finally:
        context.close()


def test_runs_appear_live_with_the_approval_badge_and_a_toast(stack: Stack, api_server: str, namespace: str,
                                                              page: Page, tmp_path: Path) -> None:
    stack.create(namespace, "agents", agent())
    page.goto(f"{api_server}/runs?namespace={namespace}")
    expect(page.locator("caption")).to_contain_text(f"0 of 0 runs in namespace {namespace}")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloaded

    stack.create(namespace, "agentruns", agent_run("late", task="started after the page loaded"))
    late = page.locator("tr[data-run=late]")
    expect(late).to_be_visible(timeout=WAIT_MS)
    expect(late.locator(".phase")).to_have_text("Succeeded", timeout=WAIT_MS)

    stack.create(namespace, "agentruns", gated("waiting"))
    row = page.locator("tr[data-run=waiting]")
    expect(row.locator(".badge.approval")).to_have_text("Approval", timeout=WAIT_MS)
    toast = page.locator("#toasts .toast")
    expect(toast).to_have_count(1, timeout=WAIT_MS)
    expect(toast).to_have_text("Run waiting of agent helper is waiting for approval.")
    expect(toast.get_by_role("link", name="waiting")).to_have_attribute(
        "href", f"/runs/waiting?namespace={namespace}")

    # The filters: awaiting approval keeps the gated run only; sorting by name puts "late" first.
    page.get_by_label("Awaiting approval").check()
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody tr[data-run=waiting]")).to_be_visible()
    page.get_by_label("Awaiting approval").uncheck()
    page.get_by_role("button", name="Apply").click()
    page.get_by_role("link", name="Run", exact=True).click()
    expect(page.locator("tbody tr").first).to_have_attribute("data-run", "waiting")
    page.get_by_role("link", name="Run", exact=True).click()
    expect(page.locator("tbody tr").first).to_have_attribute("data-run", "late")
    shot(page, tmp_path, "runs.png")
    assert_clean(page)


def test_approve_on_the_run_page_shows_the_green_banner_logs_and_the_temporal_link(
        stack: Stack, api_server: str, namespace: str, page: Page, tmp_path: Path) -> None:
    prerun = hook("fetch", "echo 'context fetched <b>for</b> the agent'")
    open_waiting(stack, api_server, namespace, page, "to-approve", cleanup="keep", lifecycle={"preRun": [prerun]})
    expect(page.locator("#head .badge.approval")).to_have_text("Approval")
    expect(page.locator("#task")).to_have_text("hello")
    expect(page.locator("#agent")).to_have_text("helper")
    wid = stack.get_run(namespace, "to-approve")["status"]["workflowId"]  # type: ignore[index]
    expect(page.locator("#temporal")).to_have_attribute(  # as the Temporal UI's own links write an ID with "/"
        "href", f"{TEMPORAL_UI}/namespaces/default/workflows/{quote(wid, safe='')}")
    expect(page.locator("#log-agent")).to_contain_text("finished: status=success", timeout=WAIT_MS)
    expect(page.locator("pre[data-hook=fetch]")).to_have_text("context fetched <b>for</b> the agent\n",
                                                               timeout=WAIT_MS)
    shot(page, tmp_path, "run-waiting.png")

    page.get_by_label("Reason").fill("looks right")
    page.get_by_role("button", name="Approve").click()
    banner = page.locator("#banner")
    expect(banner).to_have_text(
        re.compile(r"^\s*Approved by alice@example\.com at \S+: looks right\s*$"), timeout=WAIT_MS)
    expect(banner).to_have_class("banner ok")
    expect(page.locator("#head .phase")).to_have_text("Succeeded", timeout=WAIT_MS)
    expect(page.locator(".gatebar")).to_have_count(0)
    run = stack.get_run(namespace, "to-approve") or {}
    assert run["status"]["gateVerdict"] == "approved"
    assert run["status"]["gate"]["decidedBy"] == "alice@example.com"
    expect(page.locator("ol.timeline .phase")).to_have_text(["Pending", "Running", "PostRunning", "Succeeded"])
    # The logs were read again when the phase changed; the gate hook printed nothing.
    expect(page.locator("#log-agent")).to_contain_text("finished: status=success", timeout=WAIT_MS)
    expect(page.locator("pre[data-hook=gate]")).to_have_text("(no output)", timeout=WAIT_MS)
    shot(page, tmp_path, "run.png")
    assert_clean(page)


def test_reject_with_a_replacement_shows_the_red_banner_and_the_replacement(
        stack: Stack, api_server: str, namespace: str, page: Page) -> None:
    open_waiting(stack, api_server, namespace, page, "to-reject")
    replacement = "Blocked: <script>alert(1)</script> is not an answer"
    page.get_by_label("Response").fill(replacement)
    page.get_by_role("button", name="Reject").click()
    expect(page.locator("#banner")).to_contain_text("Rejected by alice@example.com", timeout=WAIT_MS)
    expect(page.locator("#banner")).to_have_class("banner bad")
    expect(page.locator("#result")).to_have_text(replacement, timeout=WAIT_MS)
    assert (stack.get_run(namespace, "to-reject") or {})["status"]["result"] == replacement
    # Cleaned up (its Jobs and pods are gone), the run's page still shows the agent's and the gate hook's logs: the
    # tail the cleanup kept.
    stack.wait_gone(namespace, "to-reject", kinds=("jobs", "pods"))
    page.reload()
    expect(page.locator("#log-agent")).to_contain_text("finished: status=success", timeout=WAIT_MS)
    expect(page.locator("pre[data-hook=gate]")).to_have_text("(no output)", timeout=WAIT_MS)
    assert_clean(page)


def test_a_verdict_from_elsewhere_shows_live_and_a_late_one_is_refused_as_text(
        stack: Stack, api_server: str, namespace: str, page: Page) -> None:
    open_waiting(stack, api_server, namespace, page, "contested")
    csrf = page.locator("form.gatebar input[name=csrf]").input_value()
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    page.evaluate("window.__sameDocument = true")
    with httpx.Client(base_url=api_server, headers={"Authorization": f"Bearer {OTHER}"}, timeout=60) as bob:
        decided = bob.post("/api/v1/runs/contested/gate-verdict", params={"namespace": namespace},
                           json={"action": "approve", "reason": "<i>bob</i> was first"})
        assert decided.status_code == 200, decided.text
        stack.wait_phase(namespace, "contested")
        refused = bob.post("/api/v1/runs/contested/gate-verdict", params={"namespace": namespace},
                           json={"action": "approve"})
    # The same refusal whether the API, Temporal or the workflow saw the end first (CI once saw them differ).
    assert refused.status_code == 409 and refused.json()["detail"] == FINISHED, refused.text
    # Without a reload: bob's verdict, its reason as text, and no gate bar any more.
    expect(page.locator("#banner")).to_contain_text("Approved by bob@example.com", timeout=WAIT_MS)
    expect(page.locator("#banner .why")).to_have_text(": <i>bob</i> was first")
    expect(page.locator(".gatebar")).to_have_count(0)
    assert page.evaluate("window.__sameDocument") is True
    # A verdict sent from a page that still showed the gate bar: the API's own refusal, as text.
    r = page.request.post(f"{api_server}/runs/contested/verdict?namespace={namespace}",
                          form={"action": "reject", "response": "too late", "csrf": csrf}, max_redirects=0)
    assert r.status == 409 and f'<p class="error" role="alert" id="error">{html.escape(FINISHED)}</p>' in r.text()
    assert_clean(page)


def test_a_hostile_agent_ref_is_text_and_runs_nothing(stack: Stack, api_server: str, namespace: str,
                                                      page: Page) -> None:
    stack.create(namespace, "agentruns", agent_run("hostile", agent_ref=HOSTILE))
    page.goto(f"{api_server}/runs?namespace={namespace}")
    row = page.locator("tr[data-run=hostile]")
    expect(row.locator("td.agent")).to_have_text(HOSTILE, timeout=WAIT_MS)
    expect(row.locator(".phase")).to_have_text("Failed", timeout=WAIT_MS)  # no such Agent; its error quotes it
    row.get_by_role("link", name="hostile").click()
    expect(page.locator("#agent")).to_have_text(HOSTILE)
    expect(page.locator("#run-error")).to_contain_text(HOSTILE)
    assert page.evaluate("document.querySelector('main').innerHTML").count("<img") == 0
    assert_clean(page)


def test_create_and_delete_from_the_console(stack: Stack, api_server: str, namespace: str, page: Page) -> None:
    stack.create(namespace, "agents", agent())
    page.goto(f"{api_server}/runs?namespace={namespace}")
    page.get_by_role("link", name="New run").click()
    page.get_by_label("Agent", exact=True).select_option("helper")
    page.get_by_label("Task").fill("say hi")
    page.get_by_label("Environment").fill("GREETING=hi there")
    page.get_by_role("button", name="Create run").click()
    expect(page.locator("#head .phase")).to_have_text("Succeeded", timeout=WAIT_MS)
    name = page.locator("h1").inner_text()
    run = stack.get_run(namespace, name) or {}
    assert run["spec"]["task"] == "say hi" and run["spec"]["env"] == {"GREETING": "hi there"}
    assert run["metadata"]["annotations"]["agentrun.dev/created-by"] == "alice@example.com"

    page.get_by_role("link", name="Delete…").click()
    page.get_by_role("button", name=f"Delete run {name}").click()
    expect(page).to_have_url(f"{api_server}/runs?namespace={namespace}")
    wait_for(lambda: stack.get_run(namespace, name) is None, timeout=30, what=f"run {name} to be deleted")
    expect(page.locator(f"tr[data-run={name}]")).to_have_count(0, timeout=WAIT_MS)
    assert_clean(page)


def test_state_changing_requests_need_the_csrf_token(stack: Stack, api_server: str, namespace: str,
                                                     page: Page) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", gated("guarded"))
    wait_gate(stack, namespace, "guarded")
    page.goto(f"{api_server}/runs/guarded?namespace={namespace}")
    csrf = page.locator("form.gatebar input[name=csrf]").input_value()
    q = f"?namespace={namespace}"
    # The browser's own cookies, from another page's script or a forged form: without the token, refused.
    forms: list[tuple[str, str, dict[str, str | float | bool]]] = [("POST", f"/runs/guarded/verdict{q}", {"action": "approve"}),
                               ("POST", f"/runs/guarded/delete{q}", {}), ("DELETE", f"/runs/guarded{q}", {}),
                               ("POST", f"/new-run{q}", {"agent": "helper", "task": "x"}),
                               ("POST", "/signout", {})]
    for method, path, form in forms:
        r = page.request.fetch(api_server + path, method=method, form=form, max_redirects=0)
        assert r.status == 403, (method, path, r.status)
        r = page.request.fetch(api_server + path, method=method, form={**form, "csrf": "forged"}, max_redirects=0)
        assert r.status == 403, (method, path, r.status)
    run = stack.get_run(namespace, "guarded") or {}
    assert run["status"]["gate"]["state"] == "pending"  # nothing was decided or deleted
    # With the page's token the same verdict goes through.
    r = page.request.post(f"{api_server}/runs/guarded/verdict{q}", form={"action": "approve", "csrf": csrf},
                          max_redirects=0)
    assert r.status == 303, r.text()
    assert stack.wait_phase(namespace, "guarded")["status"]["gateVerdict"] == "approved"


def test_the_logs_route_follows_a_running_hook_and_reads_a_finished_one(stack: Stack, api_server: str,
                                                                        namespace: str) -> None:
    """`GET /api/v1/runs/NAME/logs` (for the CLI as for the console): followed while the container runs, then
    read whole; unknown hooks and attempts are 404s that say so."""
    stack.create(namespace, "agents", agent())
    slow = hook("slow", "echo first; sleep 6; echo second")
    stack.create(namespace, "agentruns", agent_run("logged", cleanup="keep", lifecycle={"preRun": [slow]}))
    def hook_running() -> bool:
        pods = stack.core.list_namespaced_pod(namespace, label_selector="job-name=logged-prerun").items
        return any(s.name == "pre-slow" and s.state.running for p in pods for s in p.status.init_container_statuses or [])

    wait_for(hook_running, timeout=60, what="the preRun hook's container to run")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    params = {"namespace": namespace, "hook": "slow", "follow": "true"}
    seen: list[tuple[float, str]] = []
    with httpx.stream("GET", f"{api_server}/api/v1/runs/logged/logs", params=params, headers=auth,
                      timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        for text in r.iter_text():
            seen.append((time.monotonic(), text))
    body = "".join(t for _at, t in seen)
    assert body == "first\nsecond\n"
    first = next(at for at, t in seen if "first" in t)
    assert seen[-1][0] - first > 2  # the stream stayed open while the hook slept, and ended with it
    stack.wait_phase(namespace, "logged")
    with httpx.Client(base_url=api_server, headers=auth, timeout=30) as api:
        again = api.get("/api/v1/runs/logged/logs", params={"namespace": namespace, "hook": "slow"})
        assert again.status_code == 200 and again.text == "first\nsecond\n"
        agent_log = api.get("/api/v1/runs/logged/logs", params={"namespace": namespace})
        assert agent_log.status_code == 200 and "finished: status=success" in agent_log.text
        nohook = api.get("/api/v1/runs/logged/logs", params={"namespace": namespace, "hook": "nope"})
        assert nohook.status_code == 404 and nohook.json()["detail"] == 'run logged has no hook "nope"'
        attempt = api.get("/api/v1/runs/logged/logs", params={"namespace": namespace, "attempt": 2})
        assert attempt.status_code == 404 and "no attempt 2" in attempt.json()["detail"]
        assert api.get("/api/v1/runs/logged/logs", params={"namespace": namespace},
                       headers={"Authorization": "Bearer nope"}).status_code == 401
