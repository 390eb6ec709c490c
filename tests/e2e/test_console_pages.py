"""The console's Schedules, Agents and Policies pages in a real headless Chromium against the whole stack: a schedule
paused, resumed, run now and refused a bad backfill from its page (the object and the bridge follow), and an Agent
and its policy shown with everything they hold as text.

The browser, the signed-in context and the page (recording dialogs and CSP violations) are tests/e2e/test_console.py's
fixtures; its CHROMIUM skip applies here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e import test_console as console_tests
from tests.e2e.conftest import Stack, agent
from tests.e2e.test_console import CHROMIUM, HOSTILE, WAIT_MS, assert_clean, shot
from tests.waiting import wait_for

# The console tests' fixtures: one browser and one signed-in context for the module, a page per test.
browser = console_tests.browser
console = console_tests.console
page = console_tests.page

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM} (deploy/dev.sh installs chromium)")

BOLD = "<b>bold</b>"


def schedule(stack: Stack, namespace: str, name: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "sympoziumschedules", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumSchedule", "metadata": {"name": name},
        "spec": {"agentRef": "helper", "schedule": "0 0 1 1 *", "task": "new year's report"}})


def schedule_object(stack: Stack, namespace: str, name: str) -> dict[str, Any]:
    custom: Any = stack.custom
    return dict(custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "sympoziumschedules", name))


def wait_schedule(stack: Stack, namespace: str, name: str, suspend: bool, phase: str) -> None:
    def there() -> bool:
        obj = schedule_object(stack, namespace, name)
        return bool(obj["spec"].get("suspend")) is suspend and (obj.get("status") or {}).get("phase") == phase
    wait_for(there, timeout=30, what=f"schedule {name}: suspend={suspend}, phase {phase}")


def test_a_schedule_is_paused_resumed_and_run_now_from_its_pages(
        stack: Stack, api_server: str, namespace: str, page: Page, tmp_path: Path) -> None:
    schedule(stack, namespace, "nightly")
    wait_schedule(stack, namespace, "nightly", False, "Active")
    page.goto(f"{api_server}/schedules?namespace={namespace}")
    row = page.locator("tr[data-schedule=nightly]")
    expect(row.locator(".phase")).to_have_text("Active")
    expect(row.locator("code")).to_have_text("0 0 1 1 *")
    expect(row.locator("time").first).to_be_visible()  # the next run
    shot(page, tmp_path, "schedules.png")

    row.get_by_role("button", name="Pause nightly").click()
    expect(page.locator("#done")).to_contain_text("Paused")
    expect(page.locator("#suspend")).to_have_text("yes")
    wait_schedule(stack, namespace, "nightly", True, "Suspended")
    page.get_by_role("link", name="Refresh").click()
    expect(page.locator("#phase .phase")).to_have_text("Suspended")

    page.get_by_role("button", name="Resume nightly").click()
    expect(page.locator("#done")).to_contain_text("Resumed")
    wait_schedule(stack, namespace, "nightly", False, "Active")
    page.get_by_role("link", name="Refresh").click()
    expect(page.locator("#phase .phase")).to_have_text("Active")

    def runs() -> list[str]:
        custom: Any = stack.custom
        listed = custom.list_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace, "agentruns",
                                                      label_selector="sympozium.ai/schedule=nightly")
        return sorted(r["metadata"]["name"] for r in listed["items"])
    before = runs()
    page.get_by_role("button", name="Run now nightly").click()
    expect(page.locator("#done")).to_contain_text("A tick was started now")
    def more() -> list[str] | None:
        now = runs()
        return now if len(now) > len(before) else None
    after = wait_for(more, timeout=60, what="the tick's run")
    page.get_by_role("link", name="Refresh").click()
    recent = page.locator("section[aria-labelledby=runs-title] tbody tr a")
    expect(recent).to_have_count(len(after), timeout=WAIT_MS)
    assert sorted(recent.all_text_contents()) == after

    # A backfill the API refuses is shown as its refusal, the form kept.
    page.get_by_label("Start").fill("2020-01-01T00:00:00Z")
    page.get_by_label("End").fill("2999-01-01T00:00:00Z")
    page.get_by_role("button", name="Backfill").click()
    expect(page.get_by_role("alert")).to_contain_text("is in the future")
    expect(page.get_by_label("Start")).to_have_value("2020-01-01T00:00:00Z")
    shot(page, tmp_path, "schedule.png")
    assert_clean(page)

    # Without the session's CSRF token nothing changes.
    refused = page.request.post(f"{api_server}/schedules/nightly/pause?namespace={namespace}", form={"x": "1"})
    assert refused.status == 403
    assert not schedule_object(stack, namespace, "nightly")["spec"].get("suspend")
    # Without a session at all: sign in first.
    anonymous = httpx.post(f"{api_server}/schedules/nightly/pause?namespace={namespace}", data={"csrf": "x"})
    assert anonymous.status_code == 401


def test_agents_and_policies_pages_show_what_they_hold_as_text(
        stack: Stack, api_server: str, namespace: str, page: Page, tmp_path: Path) -> None:
    gate = {"name": "approve", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"],
            "timeout": "5m"}
    stack.create(namespace, "sympoziumpolicies", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "strict"},
        "spec": {"gatePolicy": {"approvers": ["alice@example.com", BOLD], "requireDistinctApprover": True},
                 "toolGating": {"defaultAction": "deny", "rules": [{"tool": "read_file", "action": "allow"}]}}})
    helper = agent()
    helper["spec"]["agents"]["default"].update(model=BOLD, lifecycle={"postRun": [gate], "gateTimeout": "1h"})
    helper["spec"].update(policyRef="strict", systemPrompt=HOSTILE)
    stack.create(namespace, "agents", helper)

    page.goto(f"{api_server}/agents?namespace={namespace}")
    row = page.locator("tr[data-agent=helper]")
    expect(row.locator(".model")).to_have_text(BOLD)
    expect(row).to_contain_text("0 preRun, 1 postRun")
    expect(row.locator(".badge.approval")).to_have_text("gate")
    assert page.locator("main b").count() == 0, "the model is text, not markup"
    shot(page, tmp_path, "agents.png")

    row.get_by_role("link", name="helper").click()
    expect(page.locator("h1")).to_have_text("helper")
    expect(page.locator("#model")).to_have_text(BOLD)
    expect(page.locator("#system-prompt")).to_have_text(HOSTILE)
    hooks = page.locator("table.hooks tbody tr")
    expect(hooks).to_have_count(1)
    expect(hooks).to_contain_text("postRun")
    expect(hooks).to_contain_text("sh -c true")
    expect(page.locator("#source")).to_contain_text("policyRef: strict")
    assert page.locator("main b, main img").count() == 0
    shot(page, tmp_path, "agent.png")
    assert_clean(page)

    page.locator("#policy").get_by_role("link", name="strict").click()
    expect(page.locator("h1")).to_have_text("strict")
    expect(page.locator("#approvers")).to_have_text(f"alice@example.com, {BOLD}")
    expect(page.locator("#source-title")).to_have_text("As stored")
    expect(page.get_by_role("link", name="helper")).to_be_visible()
    page.goto(f"{api_server}/policies?namespace={namespace}")
    expect(page.locator("tr[data-policy=strict]")).to_contain_text("deny")
    assert page.locator("main b").count() == 0
    assert_clean(page)

    # A built-in policy name an Agent may use without an object: its template's rules, said to be built in.
    page.goto(f"{api_server}/policies/restrictive?namespace={namespace}")
    expect(page.locator("h1")).to_have_text("restrictive")
    expect(page.locator("#builtin")).to_contain_text("there is no SympoziumPolicy named restrictive")
    expect(page.locator("#source")).to_contain_text("template: Restrictive")
    expect(page.locator("#source-title")).to_have_text("Not stored; as an object it would read")
    shot(page, tmp_path, "policy-builtin.png")
    page.goto(f"{api_server}/policies/ghost?namespace={namespace}")
    expect(page.locator("#error")).to_have_text(f'policy "ghost" not found in namespace "{namespace}"')
    page.goto(f"{api_server}/agents/ghost?namespace={namespace}")
    expect(page.locator("#error")).to_have_text(f'agent "ghost" not found in namespace "{namespace}"')


def test_the_api_docs_render_from_this_origin_under_the_consoles_policy(api_server: str, page: Page,
                                                                        tmp_path: Path) -> None:
    """Issue 27, hole 13: Swagger UI, vendored, renders every operation with nothing fetched from elsewhere and no
    violation of the page's Content-Security-Policy."""
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{api_server}/docs")
    expect(page.locator(".opblock-summary-path[data-path='/api/v1/runs/{name}/gate-verdict']")).to_have_count(
        1, timeout=WAIT_MS)
    expect(page.locator(".opblock-summary-path[data-path='/api/v1/schedules/{name}/backfill']")).to_have_count(1)
    assert page.evaluate("window.__csp") == []
    assert requested and all(u.startswith(api_server + "/") for u in requested), requested
    shot(page, tmp_path, "docs.png")
