"""The response gate (SPEC §4): each outcome of the table, by annotation and by Temporal Update."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from models.gate import BLOCKED_TEXT, REJECTED_TEXT, Verdict
from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow

RBAC = [{"apiGroups": ["sympozium.ai"], "resources": ["agentruns"], "verbs": ["get", "patch"]}]


def gate_hook(script: str, **extra: Any) -> dict[str, Any]:
    return {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", script], **extra}


def annotate(verdict: dict[str, Any]) -> str:
    patch = {"metadata": {"annotations": {"sympozium.ai/gate-verdict": json.dumps(verdict)}}}
    return f"kubectl patch agentrun \"$AGENT_RUN_ID\" --type=merge -p '{json.dumps(patch)}'"


def gated(stack: Stack, ns: str, name: str, script: str, *, rbac: bool = True, task: str = "hello",
          **lifecycle: Any) -> dict[str, Any]:
    stack.create(ns, "agents", agent())
    lc: dict[str, Any] = {"postRun": [gate_hook(script)], **lifecycle}
    if rbac:
        lc["rbac"] = RBAC
    stack.create(ns, "agentruns", agent_run(name, task=task, lifecycle=lc))
    return stack.wait_phase(ns, name, timeout=90)


@pytest.mark.parametrize(("verdict", "label", "result"), [
    ({"action": "approve", "reason": "looks fine"}, "approved", "echo: hello"),
    ({"action": "reject", "response": "BLOCKED_BY_POLICY"}, "rejected", "BLOCKED_BY_POLICY"),
    ({"action": "reject"}, "rejected", REJECTED_TEXT),
    ({"action": "rewrite", "response": "clean text"}, "rewritten", "clean text"),
])
def test_annotation_verdicts_resolve_the_gate(stack: Stack, namespace: str, verdict: dict[str, Any], label: str,
                                              result: str) -> None:
    run = gated(stack, namespace, "g", annotate(verdict) + "; sleep 30")
    st = run["status"]
    assert st["phase"] == "Succeeded" and st["gateVerdict"] == label
    assert st["result"].startswith(result)
    # No admission webhook stamps the writer in this stack: the verdict is unverified (SPEC §4).
    assert st["gate"]["state"] == label and st["gate"]["decidedBy"] == "unverified"
    assert any(c["type"] == "GateResolved" and c["reason"] == label for c in st["conditions"])


@pytest.mark.parametrize(("default", "label", "blocked"), [("block", "error", True), ("allow", "allowed-by-default", False)])
def test_a_failing_gate_hook_without_verdict_resolves_by_gate_default(stack: Stack, namespace: str, default: str,
                                                                      label: str, blocked: bool) -> None:
    run = gated(stack, namespace, "gf", "exit 1", gateDefault=default)
    st = run["status"]
    assert st["gateVerdict"] == label and st["phase"] == "Succeeded"
    assert (st["result"] == BLOCKED_TEXT) is blocked
    assert any(c["type"] == "PostRunFailed" for c in st["conditions"])


@pytest.mark.parametrize(("default", "label", "blocked"), [("block", "timeout", True), ("allow", "allowed-by-default", False)])
def test_gate_timeout_resolves_by_gate_default(stack: Stack, namespace: str, default: str, label: str,
                                               blocked: bool) -> None:
    run = gated(stack, namespace, "gt", "true", gateDefault=default, gateTimeout="3s")
    st = run["status"]
    assert st["gateVerdict"] == label
    assert (st["result"] == BLOCKED_TEXT) is blocked


def test_a_gate_hook_without_rbac_cannot_patch_and_the_run_resolves_by_default(stack: Stack, namespace: str) -> None:
    run = gated(stack, namespace, "norbac", annotate({"action": "approve"}), rbac=False)
    st = run["status"]
    assert st["gateVerdict"] == "error" and st["result"] == BLOCKED_TEXT


async def test_update_verdict_while_waiting_without_a_pod_and_a_second_is_refused(stack: Stack,
                                                                                  namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("wait", lifecycle={"postRun": [gate_hook("true")],
                                                                       "gateTimeout": "10m"}))
    run = stack.wait_phase(namespace, "wait", {"PostRunning"})
    core = client.CoreV1Api(stack.api)

    def waiting_without_pod() -> bool:
        r = stack.get_run(namespace, "wait") or {}
        pods: list[Any] = core.list_namespaced_pod(namespace, label_selector="sympozium.ai/agent-run=wait").items
        live = [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]
        return ((r.get("status") or {}).get("gate") or {}).get("state") == "pending" and not live

    wait_for(waiting_without_pod, timeout=30, what="the gate to wait with no pod running")
    temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    handle = temporal.get_workflow_handle(run["status"]["workflowId"])
    gate = await handle.execute_update(AgentRunWorkflow.submit_verdict,
                                       Verdict(action="rewrite", response="rewritten!", decided_by="alice"))
    # Sent straight to Temporal, not through the API: recorded as what it claims, marked as such.
    assert gate.gate_verdict == "rewritten" and gate.decided_by == "temporal:alice"
    # Refused: by the workflow while it writes the final status, or by Temporal once it has closed — a gate with
    # nothing after its verdict is cleaned up while it waits (patch cleanup-before-gate-wait), so the run can end
    # within a workflow task of the verdict. The workflow's own refusal is pinned by the unit test
    # tests/workflows/test_agent_run_workflow.py::test_a_second_verdict_is_refused.
    with pytest.raises((WorkflowUpdateFailedError, RPCError)) as refused:
        await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve"))
    if isinstance(refused.value, RPCError):
        assert refused.value.status == RPCStatusCode.NOT_FOUND
        assert "workflow execution already completed" in refused.value.message
    st = stack.wait_phase(namespace, "wait")["status"]
    assert st["gateVerdict"] == "rewritten" and st["result"] == "rewritten!"
    assert st["gate"]["decidedBy"] == "temporal:alice"


def notify_hook() -> dict[str, Any]:
    return {"name": "notify", "image": "busybox:1.36",
            "command": ["sh", "-c", 'echo "verdict=$GATE_VERDICT result=$AGENT_RESULT"']}


@pytest.mark.parametrize(("verdict", "label", "seen"), [
    ({"action": "approve"}, "approved", "echo: hello"),
    ({"action": "reject", "response": "replaced by the reviewer"}, "rejected", "replaced by the reviewer"),
])
def test_the_other_postrun_hooks_run_after_the_verdict_and_see_the_final_result(
        stack: Stack, namespace: str, verdict: dict[str, Any], label: str, seen: str) -> None:
    # notify comes first in the spec: it still runs only once the gate is resolved, in a Job of its own.
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("gn", lifecycle={
        "postRun": [notify_hook(), gate_hook(annotate(verdict) + "; sleep 60")], "rbac": RBAC}, cleanup="keep"))
    st = stack.wait_phase(namespace, "gn", timeout=90)["status"]
    assert st["gateVerdict"] == label and st["result"] == seen
    assert stack.pod_log(namespace, "gn", "post-run", "post-notify").strip() == f"verdict={label} result={seen}"
    jobs = {j.metadata.name: j for j in stack.batch.list_namespaced_job(
        namespace, label_selector="sympozium.ai/agent-run=gn").items}
    assert set(jobs) == {"gn", "gn-postgate"}, "the verdict stopped the gate hook's Job (it ran alone)"
    after = [c.name for c in jobs["gn-postgate"].spec.template.spec.init_containers]
    assert "post-notify" in after and "post-gate" not in after


def test_gate_timeout_stops_a_gate_hook_that_sleeps_and_the_other_hooks_still_run(stack: Stack,
                                                                                    namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    stack.create(namespace, "agentruns", agent_run("gts", lifecycle={
        "postRun": [gate_hook("sleep 300", timeout="10m"), notify_hook()], "gateTimeout": "6s"}, cleanup="keep"))
    st = stack.wait_phase(namespace, "gts", timeout=60)["status"]
    assert st["gateVerdict"] == "timeout" and st["result"] == BLOCKED_TEXT
    took = (datetime.fromisoformat(st["gate"]["decidedAt"]) - datetime.fromisoformat(st["gate"]["requestedAt"]))
    assert timedelta(seconds=6) <= took < timedelta(seconds=20), f"resolved {took} after the gate started"
    assert stack.pod_log(namespace, "gts", "post-run", "post-notify").strip() == f"verdict=timeout result={BLOCKED_TEXT}"


async def test_a_verdict_before_the_gate_is_refused_and_every_hook_runs_later(stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    body = agent_run("early", task="sleep:3 hi", cleanup="keep",
                     lifecycle={"postRun": [gate_hook("true"), notify_hook()], "gateTimeout": "10m"})
    # Set at creation: not a verdict (it is older than the gate), and removed when the gate starts.
    body["metadata"]["annotations"] = {"sympozium.ai/gate-verdict": json.dumps({"action": "approve"})}
    stack.create(namespace, "agentruns", body)
    run = stack.wait_phase(namespace, "early", {"Running"})
    temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    handle = temporal.get_workflow_handle(run["status"]["workflowId"])
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(AgentRunWorkflow.submit_verdict,
                                    Verdict(action="reject", response="too early", decided_by="mallory"))
    assert "no gate is waiting" in str(refused.value.cause)

    def gate_waiting() -> dict[str, Any] | None:
        r = stack.get_run(namespace, "early") or {}
        return r if ((r.get("status") or {}).get("gate") or {}).get("state") == "pending" else None

    waiting = wait_for(gate_waiting, timeout=60, what="the gate to wait")
    assert "sympozium.ai/gate-verdict" not in (waiting["metadata"].get("annotations") or {})
    gate = await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="bob"))
    assert gate.gate_verdict == "approved" and gate.decided_by == "temporal:bob"
    st = stack.wait_phase(namespace, "early")["status"]
    assert st["gateVerdict"] == "approved" and st["result"] == "echo: hi"
    refused_cond = next(c for c in st["conditions"] if c["type"] == "VerdictRefused")
    assert refused_cond["reason"] == "NoGateWaiting"
    assert stack.pod_log(namespace, "early", "post-run", "post-notify").strip() == "verdict=approved result=echo: hi"
