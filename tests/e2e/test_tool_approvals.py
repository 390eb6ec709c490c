"""Asking before acting (SPEC §10) against the whole stack: localkube, Temporal, the worker, the bridge, the API with
its admission webhooks, the scripted model in both wire formats, and the agent program in its pod.

A call whose policy action is `ask` parks the agent: while it waits no pod of the run exists (listed, not assumed),
decisions through the API, the CLI and the annotation are taken or refused each with its own reason, and the agent
started again runs what was approved exactly once (a counter file in the workspace), answers what was rejected with
who and why, runs an edit with the edited arguments, and never asks the model again for a response it journaled.
The policy's toolApproval timeout decides what nobody did; parked time is not run time; a worker killed while the run
is parked, and right after a decision, changes none of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from localkube.testing import Handle
from tests.e2e.conftest import Stack, condition
from tests.e2e.test_cli import Lines
from tests.e2e.test_gate_authority import (
    ALICE,
    BOB,
    CAROL,
    EVE,
    AuthorityApi,
    annotate_as,
    authority_api,
    person,
    protected,
    refused,
)
from tests.fake_model import Call, FakeModelServer, Turn, serve_model
from tests.waiting import wait_for

__all__ = ["authority_api", "protected"]  # the module's API with its webhooks (test_gate_authority's fixtures)
ROOT = Path(__file__).resolve().parents[2]
G, V = "sympozium.ai", "v1alpha1"
TOOL_VERDICT = "sympozium.ai/tool-verdict"
COUNT = "n=$(cat /workspace/counter 2>/dev/null || echo 0); echo $((n + 1)) > /workspace/counter; cat /workspace/counter"


@pytest.fixture
def model() -> Any:
    with serve_model() as m:
        yield m


def _key(stack: Stack, ns: str, name: str, data: dict[str, str]) -> None:
    stack.core.create_namespaced_secret(ns, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                             "stringData": data})


def guarded(stack: Stack, ns: str, model: FakeModelServer, *, name: str = "guarded", anthropic: bool = False,
            tool_approval: dict[str, Any] | None = None, **gate: Any) -> None:
    """Agent `name` under policy `name`: execute_command asks for approval; `gate` is its gatePolicy."""
    spec: dict[str, Any] = {"toolGating": {"defaultAction": "allow",
                                           "rules": [{"tool": "execute_command", "action": "ask"}]}}
    if gate:
        spec["gatePolicy"] = gate
    if tool_approval:
        spec["toolApproval"] = tool_approval
    stack.create(ns, "sympoziumpolicies", {"apiVersion": f"{G}/{V}", "kind": "SympoziumPolicy",
                                           "metadata": {"name": name}, "spec": spec})
    provider = "anthropic" if anthropic else "openai"
    _key(stack, ns, f"{name}-key", {"ANTHROPIC_API_KEY" if anthropic else "OPENAI_API_KEY": "sk-approvals"})
    stack.create(ns, "agents", {"apiVersion": f"{G}/{V}", "kind": "Agent", "metadata": {"name": name},
                                "spec": {"authRefs": [{"provider": provider, "secret": f"{name}-key"}],
                                         "policyRef": name,
                                         "agents": {"default": {"model": "m-test", "baseURL": model.root_url
                                                                if anthropic else model.base_url}}}})


def waiting_calls(stack: Stack, ns: str, run: str, round_: int = 1, timeout: float = 120) -> list[dict[str, Any]]:
    """The calls of the agent's round `round_` (its journal's) once they wait: the status shows them pending."""
    def probe() -> list[dict[str, Any]] | None:
        ta = ((stack.get_run(ns, run) or {}).get("status") or {}).get("toolApproval") or {}
        return ta["calls"] if ta.get("state") == "pending" and ta.get("round") == round_ else None
    return wait_for(probe, timeout=timeout, interval=0.2, what=f"round {round_} of run {run} to wait for approval")


def no_pod_of(stack: Stack, ns: str, run: str) -> None:
    """Listed, not assumed: no pod (and no Job) of the run exists."""
    objs = stack.run_objects(ns, run)
    assert objs["pods"] == [] and objs["jobs"] == [], objs


def decide(api: AuthorityApi, token: str, ns: str, run: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.base}/api/v1/runs/{run}/tool-approvals", params={"namespace": ns}, json=body,
                      headers={"Authorization": f"Bearer {token}"}, timeout=60)


def cli_env(api: AuthorityApi, token: str, localkube: Handle, ns: str) -> dict[str, str]:
    return {**os.environ, "AGENTRUN_API": api.base, "AGENTRUN_TOKEN": token,
            "AGENTRUN_KUBECONFIG": str(localkube.kubeconfig), "AGENTRUN_NAMESPACE": ns,
            "AGENTRUN_STATE_DIR": str(localkube.state_dir / "no-stack")}


def cli(api: AuthorityApi, token: str, localkube: Handle, ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=cli_env(api, token, localkube, ns),
                          capture_output=True, text=True, timeout=120, check=False)


def listed_as_waiting(stack: Stack, workflow_id: str) -> bool:
    """Temporal lists the run by its search attribute ToolApprovalState (what the Temporal UI filters on)."""
    async def listed() -> bool:
        temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        return any([wf.id == workflow_id async for wf in temporal.list_workflows(
            f'ToolApprovalState="pending" AND WorkflowId="{workflow_id}"')])
    return asyncio.run(listed())


def _workspace(localkube: Handle, stack: Stack, ns: str, run: str) -> Path | None:
    claims = [c for c in stack.core.list_namespaced_persistent_volume_claim(ns).items
              if c.metadata.name == f"{run}-workspace"]
    return localkube.state_dir / "volumes" / f"pvc-{claims[0].metadata.uid}" / "workspace" if claims else None


def create_as(api: AuthorityApi, token: str, ns: str, agent: str, task: str) -> str:
    r = httpx.post(f"{api.base}/api/v1/runs", params={"namespace": ns}, json={"agentRef": agent, "task": task},
                   headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 201, r.text
    return str(r.json()["metadata"]["name"])


def test_approve_reject_and_edit_in_two_rounds_with_no_pod_while_waiting_and_each_refusal_its_own(
        stack: Stack, authority_api: AuthorityApi, protected: str, model: FakeModelServer,
        localkube: Handle) -> None:
    """Created by alice through the API under approvers [alice, bob, group:reviewers] and requireDistinctApprover. Round 1:
    two calls; bob rejects one, carol edits the other (both with the CLI). Round 2: the counter command, approved by bob (CLI).
    Refused on the way, each with its own reason and the run unaffected: a decision before any call waits, an unknown
    call, other arguments' hash, a second decision, eve (no approver), alice (the creator), and an annotation from a
    ServiceAccount that may patch the run but is no approver."""
    ns = protected
    guarded(stack, ns, model, approvers=["alice@example.com", "bob@example.com", "group:reviewers"],
            requireDistinctApprover=True)
    model.delay = 60  # the first answer waits until released: the first decision comes before any call waits
    model.script = [Turn(calls=[Call("execute_command", {"command": "echo ran > /workspace/rejected"}, id="c1"),
                                Call("execute_command", {"command": "echo original > /workspace/edited"}, id="c2")]),
                    Turn(calls=[Call("execute_command", {"command": COUNT}, id="c3")]),
                    Turn(text="counted once")]
    run = create_as(authority_api, ALICE, ns, "guarded", "Count once, carefully.")
    wait_for(lambda: ((stack.get_run(ns, run) or {}).get("status") or {}).get("workflowId"), timeout=60,
             what="the run to start")
    early = decide(authority_api, BOB, ns, run, {"callId": "c1", "action": "approve", "argumentsSha256": "0" * 64})
    assert (early.status_code, early.json()["detail"]) == (409, "no tool call is waiting for a decision")
    model.delay = 0
    model.release.set()

    c1, c2 = waiting_calls(stack, ns, run)
    no_pod_of(stack, ns, run)
    claims = [(c.metadata.name, c.metadata.uid) for c in stack.core.list_namespaced_persistent_volume_claim(ns).items]
    assert [name for name, _ in claims] == [f"{run}-workspace"], claims
    st = stack.get_run(ns, run)["status"]  # type: ignore[index]
    assert condition(stack.get_run(ns, run) or {}, "AwaitingToolApproval")["status"] == "True"  # type: ignore[index]
    assert st["phase"] == "Running" and st["tokenUsage"]["totalTokens"] > 0
    assert (c1["id"], c1["tool"], json.loads(c1["arguments"])) == ("c1", "execute_command",
                                                                   {"command": "echo ran > /workspace/rejected"})
    body1 = {"callId": "c1", "action": "reject", "argumentsSha256": c1["argumentsSha256"], "reason": "not on prod"}
    unknown = decide(authority_api, BOB, ns, run, {**body1, "callId": "zz"})
    assert unknown.status_code == 409 and unknown.json()["detail"].startswith("no call zz is waiting"), unknown.text
    other = decide(authority_api, BOB, ns, run, {**body1, "argumentsSha256": c2["argumentsSha256"]})
    assert other.status_code == 409 and "other arguments than the ones waiting" in other.json()["detail"]
    eve = decide(authority_api, EVE, ns, run, body1)
    assert eve.status_code == 403 and "not among the approvers" in eve.json()["detail"], eve.text
    creator = decide(authority_api, ALICE, ns, run, body1)
    assert creator.status_code == 403 and "created this run and may not decide its tool calls" in \
        creator.json()["detail"], creator.text
    patcher = person(stack, ns, "patcher")
    why = refused(lambda: annotate_as(stack, patcher, ns, run, {TOOL_VERDICT: json.dumps(
        {"callId": "c1", "action": "approve", "argumentsSha256": c1["argumentsSha256"]})}))
    assert "may not decide this run's tool calls" in why, why
    no_pod_of(stack, ns, run)

    reject = cli(authority_api, BOB, localkube, ns, "reject", run, "--call", "c1", "--reason", "not on prod")
    assert (reject.returncode, reject.stdout) == (
        0, f"agentrun/{run}: call c1 reject by bob@example.com; still waiting: c2\n"), reject.stdout + reject.stderr
    second = decide(authority_api, CAROL, ns, run, {**body1, "action": "approve", "reason": ""})
    assert (second.status_code, second.json()["detail"]) == (
        409, "call c1 was already decided (reject by bob@example.com)"), second.text
    out = cli(authority_api, CAROL, localkube, ns, "approvals", run)
    assert out.returncode == 0 and "call c2: execute_command" in out.stdout and c2["argumentsSha256"] in out.stdout, \
        out.stdout + out.stderr
    edit = cli(authority_api, CAROL, localkube, ns, "edit", run, "--call", "c2", "--arguments",
               '{"command": "echo edited > /workspace/edited"}', "--reason", "safer")
    assert edit.returncode == 0 and "call c2 edit by carol@example.com; the agent goes on" in edit.stdout, \
        edit.stdout + edit.stderr

    (c3,) = waiting_calls(stack, ns, run, 2)
    assert json.loads(c3["arguments"]) == {"command": COUNT}
    no_pod_of(stack, ns, run)
    assert [(c.metadata.name, c.metadata.uid) for c in stack.core.list_namespaced_persistent_volume_claim(ns).items] \
        == claims, "the resumed agent has the same workspace: no new PVC"
    workspace = _workspace(localkube, stack, ns, run)
    assert workspace is not None and workspace.is_dir(), "round 1 ran in the run's workspace"
    assert not (workspace / "rejected").exists(), "the rejected command never ran"
    assert (workspace / "edited").read_text() == "edited\n", "the edit ran with the edited arguments, not the original"
    assert not (workspace / "counter").exists(), "the counter waits for its approval"
    wid = stack.get_run(ns, run)["status"]["workflowId"]  # type: ignore[index]
    wait_for(lambda: listed_as_waiting(stack, wid) or None, timeout=30, what="ToolApprovalState=pending in Temporal")
    watched = Lines(["get", run, "-w"], env=cli_env(authority_api, BOB, localkube, ns))
    try:
        shown = watched.wait_line(lambda line: "waiting for approval: call c3 execute_command" in line, timeout=60,
                                  what="get -w showing the waiting call")
        assert f"(agentrun approve {run} --call c3)" in shown, shown
        approve = cli(authority_api, BOB, localkube, ns, "approve", run, "--call", "c3")
        assert approve.returncode == 0, approve.stdout + approve.stderr
        assert watched.wait_exit(timeout=180) == 0, "get -w ends with the run"
    finally:
        watched.kill()
    wait_for(lambda: not listed_as_waiting(stack, wid) or None, timeout=30, what="ToolApprovalState no longer pending")

    st = stack.wait_phase(ns, run, timeout=180)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "counted once"), st
    assert len(model.requests) == 3, "each model response was asked for once: turns 1 and 2 came from the journal"
    results = model.requests[1].tool_results()
    assert results[-2] == "rejected by bob@example.com: not on prod", results
    assert "(the arguments were edited by carol@example.com" in results[-1], results
    assert model.requests[2].tool_results()[-1].strip() == "1", "the approved counter ran exactly once"
    audit = st["toolApprovals"]
    assert [(d["callId"], d["action"], d["decidedBy"], d["source"]) for d in audit] == [
        ("c1", "reject", "bob@example.com", "api"), ("c2", "edit", "carol@example.com", "api"),
        ("c3", "approve", "bob@example.com", "api")]
    assert audit[1]["argumentsSha256"] == c2["argumentsSha256"] and \
        json.loads(audit[1]["arguments"]) == {"command": "echo edited > /workspace/edited"}, \
        "the audit shows both: the hash of what was asked and the arguments that ran"
    assert st["jobName"] == f"{run}-resume2" and st["activeMs"] > 0 and st["waitedMs"] > 0, st
    events = [e for e in stack.core.list_namespaced_event(ns).items if e.reason == "VerdictRefused"]
    assert len(events) >= 3, [e.message for e in events]


def test_the_policys_timeout_denies_and_the_model_is_told_and_parked_time_is_not_run_time(
        stack: Stack, authority_api: AuthorityApi, namespace: str, model: FakeModelServer) -> None:
    """Anthropic's wire, streaming. `hasty`: toolApproval.timeout 5s, nobody decides: the call is denied and the
    model reads that the approval timed out. `patient` (with a preRun hook): timeout 25s, parked 40s with no pod of
    the run, then approved: it succeeds, its status says how the time went."""
    ns = namespace
    guarded(stack, ns, model, name="hasty", anthropic=True, tool_approval={"timeout": "5s", "onTimeout": "deny"})
    guarded(stack, ns, model, name="patient", anthropic=True)
    model.script = [Turn(calls=[Call("execute_command", {"command": "echo late > /workspace/late"}, id="t1")]),
                    Turn(text="noted")]
    stack.create(ns, "agentruns", {"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "hasty"},
                                   "spec": {"agentRef": "hasty", "task": "Try it."}})
    st = stack.wait_phase(ns, "hasty", timeout=120)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "noted"), st
    told = model.requests[-1].tool_results()[-1]
    assert told == "not run: the approval timed out: no decision within 5s (toolApproval.onTimeout: deny)", told
    assert st["toolApprovals"][0]["source"] == "timeout" and st["toolApprovals"][0]["decidedBy"] == "timeout"
    assert all(r.path.endswith("/messages") for r in model.requests), "Anthropic's wire"

    model.script, model.served = [Turn(calls=[Call("execute_command", {"command": COUNT}, id="p1")]),
                                  Turn(text="patiently done")], 0
    asked = len(model.requests)
    stack.create(ns, "agentruns", {"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "patient"},
                                   "spec": {"agentRef": "patient", "task": "Wait for it.", "timeout": "25s",
                                            "lifecycle": {"preRun": [{"name": "prep", "image": "busybox:1.36",
                                                                      "command": ["sh", "-c", "true"]}]}}})
    (p1,) = waiting_calls(stack, ns, "patient")
    parked_at = time.monotonic()
    no_pod_of(stack, ns, "patient")  # neither the agent's (with its tools) nor the preRun hook's
    wait_for(lambda: time.monotonic() - parked_at >= 40 or None, timeout=60, interval=1,
             what="40 seconds parked at the approval")
    no_pod_of(stack, ns, "patient")
    assert stack.get_run(ns, "patient")["status"]["phase"] == "Running"  # type: ignore[index]
    ok = decide(authority_api, BOB, ns, "patient", {"callId": "p1", "action": "approve",
                                                    "argumentsSha256": p1["argumentsSha256"]})
    assert ok.status_code == 200, ok.text
    st = stack.wait_phase(ns, "patient", timeout=120)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "patiently done"), st
    assert model.requests[-1].tool_results()[-1].strip() == "1"
    assert len(model.requests) - asked == 2
    assert st["waitedMs"] >= 40_000 and st["activeMs"] < 25_000, st


def test_a_worker_killed_while_parked_and_right_after_a_decision_runs_each_call_exactly_once(
        stack: Stack, authority_api: AuthorityApi, protected: str, model: FakeModelServer) -> None:
    """Round 1: the worker is SIGKILLed while the run is parked, and an approver's annotation decides while no
    worker runs (the bridge's signal waits in Temporal); round 2: the worker is SIGKILLed right after the API took
    the decision, while the agent is being started again. Each counter reads 1."""
    ns = protected
    approver = person(stack, ns, "approver")
    from tests.localkube.test_tokens_and_access_reviews import grant, sa_subject
    grant(stack.api, ns, "approver-decides", [{"apiGroups": [G], "resources": ["agentruns"], "verbs": ["approve"]}],
          sa_subject(ns, "approver"))
    guarded(stack, ns, model, approvers=[f"system:serviceaccount:{ns}:approver", "bob@example.com"])
    model.script = [Turn(calls=[Call("execute_command", {"command": COUNT.replace("counter", "one")}, id="k1")]),
                    Turn(calls=[Call("execute_command", {"command": COUNT.replace("counter", "two")}, id="k2")]),
                    Turn(text="both once")]
    stack.create(ns, "agentruns", {"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "killed"},
                                   "spec": {"agentRef": "guarded", "task": "Twice."}})
    (k1,) = waiting_calls(stack, ns, "killed")
    stack.worker.kill()
    try:
        annotate_as(stack, approver, ns, "killed", {TOOL_VERDICT: json.dumps(
            {"callId": "k1", "action": "approve", "argumentsSha256": k1["argumentsSha256"]})})
        no_pod_of(stack, ns, "killed")
    finally:
        stack.worker.start()
    (k2,) = waiting_calls(stack, ns, "killed", 2)
    ok = decide(authority_api, BOB, ns, "killed", {"callId": "k2", "action": "approve",
                                                   "argumentsSha256": k2["argumentsSha256"]})
    assert ok.status_code == 200, ok.text
    stack.worker.kill()
    stack.worker.start()
    st = stack.wait_phase(ns, "killed", timeout=180)["status"]
    assert (st["phase"], st["result"]) == ("Succeeded", "both once"), st
    one, two = (model.requests[i].tool_results()[-1].strip() for i in (1, 2))
    assert (one, two) == ("1", "1"), "each approved command ran exactly once"
    assert len(model.requests) == 3
    assert [(d["callId"], d["source"], d["decidedBy"]) for d in st["toolApprovals"]] == [
        ("k1", "annotation", f"system:serviceaccount:{ns}:approver"), ("k2", "api", "bob@example.com")]
