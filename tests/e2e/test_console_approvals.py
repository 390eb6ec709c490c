"""The console's tool-approval bar (SPEC §10) in a real headless Chromium against the whole stack: a run's page shows
each call waiting for approval with its tool and full arguments as text (a `<script>` in them is text, never run),
and approve, reject with a reason and edit the arguments as JSON each reach the agent; the runs list shows the badge
and filters on it; the gate's bar shows the response it holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import Stack, agent, agent_run, hook
from tests.e2e.test_console import WAIT_MS, assert_clean, browser, console, page, shot
from tests.e2e.test_tool_approvals import guarded, waiting_calls
from tests.fake_model import Call, FakeModelServer, Turn, serve_model
from tests.waiting import wait_for

__all__ = ["browser", "console", "page"]  # test_console's signed-in Chromium
HOSTILE = '<script>document.title="pwned"</script>'


@pytest.fixture
def model() -> Any:
    with serve_model() as m:
        yield m


def test_the_tool_approval_bar_approves_rejects_and_edits_with_the_arguments_shown_as_text(
        stack: Stack, api_server: str, namespace: str, page: Page, model: FakeModelServer, tmp_path: Path) -> None:
    ns = namespace
    guarded(stack, ns, model)
    model.script = [Turn(calls=[Call("execute_command", {"command": f"echo '{HOSTILE}' > /workspace/s"}, id="c1"),
                                Call("execute_command", {"command": "rm -rf /workspace/all"}, id="c2"),
                                Call("execute_command", {"command": "echo a"}, id="c3")]),
                    Turn(text="decided")]
    page.goto(f"{api_server}/runs?namespace={ns}")  # open before the run: its toast comes as the calls wait
    stack.create(ns, "agentruns", agent_run("asking", task="Three things.", agent_ref="guarded"))
    waiting_calls(stack, ns, "asking")
    row = page.locator("tr[data-run=asking]")
    expect(row.locator(".badge.tools")).to_have_text("Tool approval", timeout=WAIT_MS)
    toast = page.locator("#toasts .toast")
    expect(toast).to_have_text("Run asking of agent guarded waits for approval of 3 tool call(s): execute_command, "
                               "execute_command, execute_command.", timeout=WAIT_MS)
    expect(toast.get_by_role("link", name="asking")).to_have_attribute("href", f"/runs/asking?namespace={ns}")
    page.goto(f"{api_server}/runs?namespace={ns}&tools=1")
    expect(page.locator("tr[data-run=asking]")).to_have_count(1)

    page.goto(f"{api_server}/runs/asking?namespace={ns}")
    bar = page.locator("#tool-approval")
    expect(bar.locator("form.toolcall")).to_have_count(3)
    first = bar.locator("form[data-call=c1]")
    expect(first.locator(".tool")).to_have_text("execute_command")
    shown = first.locator("textarea").input_value()
    assert json.loads(shown) == {"command": f"echo '{HOSTILE}' > /workspace/s"}, "the arguments, whole, as text"
    assert "<script>" in shown
    assert page.locator("#tool-approval script").count() == 0 and page.title() != "pwned"
    expect(page.locator("#tool-badge")).to_have_text("Tool approval")
    shot(page, tmp_path, "tool-approval-bar.png")

    first.get_by_role("button", name="Approve").click()
    expect(page.locator("#sent")).to_contain_text("Your decision (approve) was accepted", timeout=WAIT_MS)
    second = page.locator("form[data-call=c2]")
    second.locator("input[name=reason]").fill("not <b>everything</b>")
    second.get_by_role("button", name="Reject").click()
    expect(page.locator("#sent")).to_contain_text("Your decision (reject) was accepted", timeout=WAIT_MS)
    third = page.locator("form[data-call=c3]")
    third.locator("textarea").fill('{"command": "echo b > /workspace/b"}')
    third.get_by_role("button", name="Edit").click()
    expect(page.locator("#sent")).to_contain_text("Your decision (edit) was accepted", timeout=WAIT_MS)

    expect(page.locator("#head .phase")).to_have_text("Succeeded", timeout=WAIT_MS * 4)
    expect(page.locator("#tool-approval")).to_have_count(0)
    expect(page.locator("#tool-decisions tbody tr")).to_have_count(3, timeout=WAIT_MS)
    expect(page.locator("#tool-decisions")).to_contain_text("not <b>everything</b>")
    st = stack.wait_phase(ns, "asking")["status"]
    assert [(d["callId"], d["action"], d["decidedBy"]) for d in st["toolApprovals"]] == [
        ("c1", "approve", "alice@example.com"), ("c2", "reject", "alice@example.com"),
        ("c3", "edit", "alice@example.com")]
    assert json.loads(st["toolApprovals"][2]["arguments"]) == {"command": "echo b > /workspace/b"}
    answers = model.requests[1].tool_results()
    assert answers[1] == "rejected by alice@example.com: not <b>everything</b>", answers
    assert "echo b" in answers[2] and HOSTILE not in page.title()
    shot(page, tmp_path, "tool-approval-decided.png")
    assert_clean(page)


def test_the_gate_bar_shows_the_response_it_holds(stack: Stack, api_server: str, namespace: str,
                                                  page: Page) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("held", task="<i>hold</i> me",
                                                   lifecycle={"postRun": [hook("gate", "true", gate=True)]}))
    wait_for(lambda: ((stack.get_run(namespace, "held") or {}).get("status", {}).get("gate") or {})
             .get("state") == "pending", timeout=60, what="the gate to wait")
    page.goto(f"{api_server}/runs/held?namespace={namespace}")
    expect(page.locator("#held-response")).to_have_text("echo: <i>hold</i> me")
    expect(page.locator("#result")).to_contain_text("Held by the response gate")
    expect(page.locator("table.small").first).not_to_contain_text("Total</th><td>0")
    usage = (stack.get_run(namespace, "held") or {})["status"]["tokenUsage"]
    assert usage["totalTokens"] > 0, "written when the agent ended, not after the gate"
    assert_clean(page)
