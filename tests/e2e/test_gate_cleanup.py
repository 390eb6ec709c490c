"""A run waiting at a gate that can start nothing more holds nothing (workflows/agent_run.py, `_clean_up_at_gate`),
its verdict costs the worker one request, and what a run makes goes with the run object through Kubernetes' garbage
collector (ownerReferences), the run's Jobs' logs included.

The real stack: localkube (its garbage collector), the Temporal dev server, the worker and the bridge as processes.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from models.gate import Verdict
from tests.e2e.conftest import Stack, agent, agent_run, hook
from tests.e2e.test_requests import audit_lines, requests_of
from tests.waiting import wait_for, wait_for_async
from workflows.agent_run import AgentRunWorkflow

GATE = {"postRun": [hook("g", "true", gate=True)], "gateTimeout": "72h"}


def _parked_and_cleaned(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    """The run waiting at its gate with none of its Jobs, pods or workspace left and no finalizer."""
    def probe() -> dict[str, Any] | None:
        run = stack.get_run(ns, name) or {}
        pending = ((run.get("status") or {}).get("gate") or {}).get("state") == "pending"
        objs = stack.run_objects(ns, name)
        held = objs["jobs"] or objs["pods"] or objs["pvcs"] or (run.get("metadata") or {}).get("finalizers")
        return run if pending and not held else None
    return wait_for(probe, timeout=60, what=f"run {name} waiting at its gate, holding nothing")


async def test_a_run_at_a_gate_with_nothing_after_it_waits_holding_nothing_and_its_verdict_is_one_request(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("gated", lifecycle=GATE))
    run = _parked_and_cleaned(stack, ns, "gated")
    logs = stack.core.read_namespaced_config_map("gated-logs", ns).data
    assert any(key.startswith("gated.") for key in logs) and any(key.startswith("gated-postrun.") for key in logs), \
        f"the agent's and the gate hook's logs were kept before their Jobs went: {sorted(logs)}"
    client = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    handle = client.get_workflow_handle(run["status"]["workflowId"])
    since = audit_lines(stack.kube)
    await handle.execute_update(AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="alice"))
    done = stack.wait_phase(ns, "gated")
    assert (done["status"]["phase"], done["status"]["gateVerdict"]) == ("Succeeded", "approved")
    await handle.result()
    assert requests_of(stack.kube, ns, since, "worker") == {"PATCH agentruns/{name}/status": 1}, \
        "the verdict's one request: the final status (nothing left to clean, no finalizer to release)"


async def test_deleting_a_run_that_waits_at_its_gate_released_ends_its_workflow(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("dropped", lifecycle=GATE))
    run = _parked_and_cleaned(stack, ns, "dropped")
    stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "dropped")
    assert stack.get_run(ns, "dropped") is None, "no finalizer holds it: gone at once"
    client = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    handle = client.get_workflow_handle(run["status"]["workflowId"])

    async def cancelled() -> bool:
        return (await handle.describe()).status == WorkflowExecutionStatus.CANCELED

    await wait_for_async(cancelled, timeout=30, what="the bridge to cancel the deleted run's workflow")


def test_a_kept_runs_jobs_pods_and_logs_go_with_the_run_through_the_garbage_collector(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent())
    stack.create(ns, "agentruns", agent_run("kept", cleanup="keep", lifecycle={"postRun": [hook("p", "true")]}))
    assert stack.wait_phase(ns, "kept")["status"]["phase"] == "Succeeded"
    wait_for(lambda: not (stack.get_run(ns, "kept") or {}).get("metadata", {}).get("finalizers"), timeout=30,
             what="the run released")
    assert stack.run_objects(ns, "kept")["jobs"], "cleanup: keep leaves the Jobs"
    assert stack.core.list_namespaced_config_map(ns, field_selector="metadata.name=kept-logs").items
    stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "kept")
    stack.wait_gone(ns, "kept")
    wait_for(lambda: not stack.core.list_namespaced_config_map(ns, field_selector="metadata.name=kept-logs").items,
             timeout=30, what="the run's logs ConfigMap collected with it")
