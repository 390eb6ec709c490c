"""Runs of each shape, whose histories must replay against the current workflow code.

With AGENTRUN_RECORD_HISTORIES=1 they are also written to tests/workflows/histories/, which
tests/workflows/test_replay.py replays on every CI run (no server needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from models.approvals import ToolDecision
from models.gate import Verdict
from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for
from tests.workflows.cluster import run_result
from workflows.agent_run import AgentRunWorkflow
from workflows.agent_run_v1 import AgentRunWorkflowV1

OUT = Path(__file__).resolve().parents[1] / "workflows" / "histories"
HOOK = {"name": "h", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
SHAPES: dict[str, dict[str, Any]] = {
    "plain-success": {},
    "hooks-success": {"lifecycle": {"preRun": [HOOK], "postRun": [HOOK],
                                    "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}},
    "agent-failure": {"task": "fail:boom", "lifecycle": {"postRun": [HOOK]}},
    "prerun-skip": {"lifecycle": {"preRun": [{**HOOK, "command": ["sh", "-c", "echo later > /ipc/control/skip"]}]}},
    "invalid-spec": {"timeout": "soon"},
    "gate-timeout": {"lifecycle": {"postRun": [{**HOOK, "gate": True}], "gateTimeout": "2s"}},
    "gate-rejected-by-signal": {"task": "sleep:2 hi", "lifecycle": {"postRun": [{**HOOK, "gate": True}]}},
    # Since verdicts count only while the gate waits: one refused before the gate, then gateTimeout; and the
    # other postRun hooks in a Job of their own after the verdict.
    "gate-refused-early-then-timeout": {"task": "sleep:2 hi", "lifecycle": {
        "postRun": [{**HOOK, "name": "g", "gate": True}, HOOK], "gateTimeout": "2s"}},
    "gate-approved-then-hooks": {"lifecycle": {"postRun": [HOOK, {**HOOK, "name": "g", "gate": True}]}},
    # lifecycle.retry: attempt 1 is sent back (a retry verdict), attempt 2 (its own Jobs) approved, then the hooks.
    "gate-retried-then-approved": {"lifecycle": {"postRun": [HOOK, {**HOOK, "name": "g", "gate": True}],
                                                 "retry": {"maxAttempts": 2, "backoff": "1s"}}},
    # A gate whose verdict starts nothing more: the run is cleaned up and released as the gate begins to wait (patch
    # cleanup-before-gate-wait), then approved: the verdict's one step is the final status.
    "gate-approved-after-cleanup": {"lifecycle": {"postRun": [{**HOOK, "name": "g", "gate": True}]}},
    # A gate with another postRun hook after it: its finished Jobs go (their logs kept) as it begins to wait, the run
    # keeps its finalizer; approved, then the hook.
    "gate-approved-after-jobs-gone": {"lifecycle": {"postRun": [HOOK, {**HOOK, "name": "g", "gate": True}]}},
    # A Sympozium field with no effect here: the FieldsIgnored condition (patch fields-ignored-condition).
    "fields-ignored": {"dryRun": True},
    # A sub-agent of a run made first: the SubAgent condition (patch sub-agent-condition).
    "sub-agent": {"parent": {"runName": "boss", "sessionKey": "s", "spawnDepth": 1}},
    # The agent's pod is deleted while it runs: the agent is started again in a Job of its own (patch agent-restarts).
    "agent-restarted": {"task": "sleep:6 hi"},
    # Tool calls that wait for approval (patch tool-approvals): two rounds, each approved by an Update after one
    # refused for an unknown call; and one the policy's toolApproval timeout denies.
    "tool-approved-twice": {"task": 'save\ntool:write_file {"path": "a", "content": "1"}\n'
                                    'tool:write_file {"path": "b", "content": "2"}'},
    "tool-denied-by-timeout": {"task": 'save\ntool:write_file {"path": "a", "content": "1"}'},
}
# Shapes whose Agent's policy asks for approval of write_file, with this toolApproval.
ASKS: dict[str, dict[str, str]] = {"tool-approved-twice": {}, "tool-denied-by-timeout": {"timeout": "2s"}}
# Shapes whose agent pod the test deletes once it runs.
POD_DELETED = {"agent-restarted"}
EARLY_SIGNAL = {"gate-refused-early-then-timeout"}
# Shapes approved once the gate waits with the run's Jobs gone (cleaned up before the wait).
CLEANED_BEFORE_VERDICT = {"gate-approved-after-cleanup", "gate-approved-after-jobs-gone"}
SIGNAL_WHILE_PENDING = {"gate-rejected-by-signal": "reject", "gate-approved-then-hooks": "approve",
                        "gate-retried-then-approved": "retry"}
# After the first verdict: the next attempt's gate waits, and this verdict decides it.
THEN_WHILE_PENDING = {"gate-retried-then-approved": "approve"}
# Shapes recorded again as v8 (patch cleanup-before-gate-wait: a gate with nothing after it is cleaned up as it
# waits and ends with one local step; one with more after it has its finished Jobs go as it waits).
V8 = {"gate-approved-after-cleanup", "gate-approved-after-jobs-gone"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_history_of_each_run_shape_replays(stack: Stack, namespace: str, shape: str) -> None:
    body = agent()
    if shape in ASKS:
        stack.create(namespace, "sympoziumpolicies", {
            "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "asks"},
            "spec": {"toolGating": {"rules": [{"tool": "write_file", "action": "ask"}]},
                     "toolApproval": ASKS[shape]}})
        body["spec"]["policyRef"] = "asks"
    stack.create(namespace, "agents", body)
    spec = dict(SHAPES[shape])
    task = spec.pop("task", "hello")
    if "parent" in spec:
        stack.create(namespace, "agentruns", agent_run(spec["parent"]["runName"]))
        stack.wait_phase(namespace, spec["parent"]["runName"])
    stack.create(namespace, "agentruns", agent_run("r", task=task, **spec))
    client = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    if shape in EARLY_SIGNAL:
        running = stack.wait_phase(namespace, "r", {"Running"})
        await client.get_workflow_handle(running["status"]["workflowId"]).signal(
            AgentRunWorkflow.verdict, Verdict(action="reject", response="no"))
    if shape in SIGNAL_WHILE_PENDING:
        def pending(job: str = "r") -> dict[str, Any] | None:
            r = stack.get_run(namespace, "r") or {}
            st = r.get("status") or {}
            return r if (st.get("gate") or {}).get("state") == "pending" and st.get("jobName") == job else None
        waiting = wait_for(pending, timeout=60, what="the gate to wait")
        await client.get_workflow_handle(waiting["status"]["workflowId"]).signal(
            AgentRunWorkflow.verdict, Verdict(action=SIGNAL_WHILE_PENDING[shape], response="no"))
        if shape in THEN_WHILE_PENDING:
            again = wait_for(lambda: pending("r-try2"), timeout=60, what="attempt 2's gate to wait")
            await client.get_workflow_handle(again["status"]["workflowId"]).signal(
                AgentRunWorkflow.verdict, Verdict(action=THEN_WHILE_PENDING[shape]))
    if shape in CLEANED_BEFORE_VERDICT:
        def cleaned() -> dict[str, Any] | None:
            r = stack.get_run(namespace, "r") or {}
            pending = ((r.get("status") or {}).get("gate") or {}).get("state") == "pending"
            jobs = stack.batch.list_namespaced_job(namespace, label_selector="sympozium.ai/agent-run=r").items
            released = not (r.get("metadata") or {}).get("finalizers")
            return r if pending and not jobs and released == (shape == "gate-approved-after-cleanup") else None
        waiting = wait_for(cleaned, timeout=60, what="the gate to wait with the run's Jobs gone")
        await client.get_workflow_handle(waiting["status"]["workflowId"]).signal(
            AgentRunWorkflow.verdict, Verdict(action="approve"))
    if shape == "tool-approved-twice":
        for round_ in (1, 2):
            def parked(n: int = round_) -> dict[str, Any] | None:
                r = stack.get_run(namespace, "r") or {}
                ta = (r.get("status") or {}).get("toolApproval") or {}
                return r if ta.get("state") == "pending" and ta.get("round") == n else None
            waiting = wait_for(parked, timeout=90, what=f"round {round_}'s call to wait")
            handle = client.get_workflow_handle(waiting["status"]["workflowId"])
            call = waiting["status"]["toolApproval"]["calls"][0]
            if round_ == 1:
                with pytest.raises(WorkflowUpdateFailedError):
                    await handle.execute_update(AgentRunWorkflow.decide_tool_call, ToolDecision(
                        call_id="nope", action="approve", arguments_sha256=call["argumentsSha256"]))
            await handle.execute_update(AgentRunWorkflow.decide_tool_call, ToolDecision(
                call_id=call["id"], action="approve", arguments_sha256=call["argumentsSha256"], decided_by="rec"))
    if shape in POD_DELETED:
        def agent_pod() -> Any:
            pods = stack.core.list_namespaced_pod(namespace, label_selector="job-name=r").items
            return pods[0] if pods and pods[0].status.phase == "Running" else None
        pod = wait_for(agent_pod, timeout=60, what="the agent's pod to run")
        stack.core.delete_namespaced_pod(pod.metadata.name, namespace)
    run = stack.wait_phase(namespace, "r", timeout=120)
    if shape in POD_DELETED:
        assert (run["status"]["phase"], run["status"]["agentRestarts"]) == ("Succeeded", 1), run["status"]
    if shape in ASKS:
        decided = [(d["action"], d["source"]) for d in run["status"]["toolApprovals"]]
        assert run["status"]["phase"] == "Succeeded" and decided == (
            [("approve", "temporal")] * 2 if shape == "tool-approved-twice" else [("reject", "timeout")]), run["status"]
    handle = client.get_workflow_handle(run["status"]["workflowId"])
    await run_result(handle)  # the workflow has also finished its cleanup (a failed run's workflow fails)
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
    if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1":
        _save(shape, history.to_json(), "v8" if shape in V8 else "v7")


def _save(shape: str, text: str, version: str = "v5") -> None:
    """Existing recordings are kept: that older histories still replay is the point."""
    OUT.mkdir(parents=True, exist_ok=True)
    # Type "AgentRun"; the unprefixed ones are version 1 ("AgentRunWorkflow"); v2- were recorded before the final
    # status moved into the cleanup step (patch final-status-in-cleanup), v3- after, v4- once a run looks at its
    # Jobs in a local activity (patch observe-locally), v5- once a verdict claiming our API or bridge must carry their
    # signature (patch signed-verdicts, marked where a run's first verdict arrives: the shapes that get one) and once a
    # lost agent pod is started again (patch agent-restarts: the agent-restarted shape); v6- once tool calls wait for
    # approval (patch tool-approvals: the tool-* shapes); v7- once a run's workflow closes with its run, its unpublished
    # events handed on (patch events-outlive-run, every shape), and a failed run's workflow fails (failed-run-fails);
    # v8- once a gate with nothing after its verdict is cleaned up as it begins to wait (cleanup-before-gate-wait).
    path = OUT / f"{version}-{shape}.json"
    if not path.exists():
        path.write_text(text)
