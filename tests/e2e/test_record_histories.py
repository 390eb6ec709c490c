"""Runs of each shape, whose histories must replay against the current workflow code.

With AGENTRUN_RECORD_HISTORIES=1 they are also written to tests/workflows/histories/, which
tests/workflows/test_replay.py replays on every CI run (no server needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from models.gate import Verdict
from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for
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
    # A Sympozium field with no effect here: the FieldsIgnored condition (patch fields-ignored-condition).
    "fields-ignored": {"dryRun": True},
    # A sub-agent of a run made first: the SubAgent condition (patch sub-agent-condition).
    "sub-agent": {"parent": {"runName": "boss", "sessionKey": "s", "spawnDepth": 1}},
    # The agent's pod is deleted while it runs: the agent is started again in a Job of its own (patch agent-restarts).
    "agent-restarted": {"task": "sleep:6 hi"},
}
# Shapes whose agent pod the test deletes once it runs.
POD_DELETED = {"agent-restarted"}
EARLY_SIGNAL = {"gate-refused-early-then-timeout"}
SIGNAL_WHILE_PENDING = {"gate-rejected-by-signal": "reject", "gate-approved-then-hooks": "approve",
                        "gate-retried-then-approved": "retry"}
# After the first verdict: the next attempt's gate waits, and this verdict decides it.
THEN_WHILE_PENDING = {"gate-retried-then-approved": "approve"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_history_of_each_run_shape_replays(stack: Stack, namespace: str, shape: str) -> None:
    stack.create(namespace, "agents", agent())
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
    if shape in POD_DELETED:
        def agent_pod() -> Any:
            pods = stack.core.list_namespaced_pod(namespace, label_selector="job-name=r").items
            return pods[0] if pods and pods[0].status.phase == "Running" else None
        pod = wait_for(agent_pod, timeout=60, what="the agent's pod to run")
        stack.core.delete_namespaced_pod(pod.metadata.name, namespace)
    run = stack.wait_phase(namespace, "r", timeout=120)
    if shape in POD_DELETED:
        assert (run["status"]["phase"], run["status"]["agentRestarts"]) == ("Succeeded", 1), run["status"]
    handle = client.get_workflow_handle(run["status"]["workflowId"])
    await handle.result()  # the workflow has also finished its cleanup
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[AgentRunWorkflow, AgentRunWorkflowV1], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
    if os.environ.get("AGENTRUN_RECORD_HISTORIES") == "1":
        _save(shape, history.to_json())


def _save(shape: str, text: str) -> None:
    """Existing recordings are kept: that older histories still replay is the point."""
    OUT.mkdir(parents=True, exist_ok=True)
    # Type "AgentRun"; the unprefixed ones are version 1 ("AgentRunWorkflow"); v2- were recorded before the final
    # status moved into the cleanup step (patch final-status-in-cleanup), v3- after, v4- once a run looks at its
    # Jobs in a local activity (patch observe-locally), v5- once a verdict claiming our API or bridge must carry their
    # signature (patch signed-verdicts, marked where a run's first verdict arrives: the shapes that get one) and once a
    # lost agent pod is started again (patch agent-restarts: the agent-restarted shape).
    path = OUT / f"v5-{shape}.json"
    if not path.exists():
        path.write_text(text)
