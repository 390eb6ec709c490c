"""Sandboxes and sub-agents end to end (issue 14 items 4-5), against localkube and the Temporal dev server.

`agentSandbox.runtimeClass` is the agent pod's runtimeClassName or the run fails naming the field; `sandbox.enabled`
puts Sympozium's sidecar beside the agent with the policy's image and caps; a sub-agent over its parent's limits fails
naming the limit; deleting a parent deletes, and so cancels, its children."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter

from agentrunner.executor import wrap
from models.resolve import RunRef
from models.run import workflow_id
from tests.e2e.conftest import Stack, agent, agent_run, ensure_runtime_class, hook
from tests.waiting import wait_for


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": name},
            "spec": spec}


def _describe(stack: Stack, wid: str) -> dict[str, Any]:
    async def describe() -> dict[str, Any]:
        temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
        desc = await temporal.get_workflow_handle(wid).describe()
        return {"memo": await desc.memo(), "details": await desc.static_details() or ""}
    return asyncio.run(describe())


def _agent_pod(stack: Stack, ns: str, run: str) -> Any:
    pods = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={run},sympozium.ai/component=agent-run").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def test_agent_sandbox_runtime_class_and_the_sandbox_sidecar_reach_the_pod_or_fail_naming_the_field(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    ensure_runtime_class(stack.api, "gvisor")
    stack.create(ns, "sympoziumpolicies", _policy("boxed", {"sandboxPolicy": {
        "required": True, "defaultImage": "ghcr.io/org/sandbox:2", "maxCPU": "250m", "maxMemory": "384Mi",
        "agentSandboxPolicy": {"allowedRuntimeClasses": ["gvisor", "kata-missing"]}}}))
    stack.create(ns, "agents", {**agent("boxed"), "spec": {**agent("boxed")["spec"], "policyRef": "boxed"}})
    stack.create(ns, "agentruns", agent_run("iso", agent_ref="boxed", cleanup="keep", sandbox={"enabled": True},
                                            agentSandbox={"enabled": True, "runtimeClass": "gvisor"}))
    stack.create(ns, "agentruns", agent_run("nocls", agent_ref="boxed", sandbox={"enabled": True},
                                            agentSandbox={"enabled": True, "runtimeClass": "kata-missing"}))

    assert stack.wait_phase(ns, "iso")["status"]["phase"] == "Succeeded"
    pod = _agent_pod(stack, ns, "iso")
    assert pod.spec.runtime_class_name == "gvisor" and pod.metadata.owner_references[0].kind == "Job"
    [sidecar] = pod.spec.init_containers  # the sandbox, where the run's commands run: no tools container
    assert (sidecar.name, sidecar.image, sidecar.restart_policy, sidecar.command) == (
        "sandbox", "ghcr.io/org/sandbox:2", "Always", wrap("sandbox", ["sleep", "infinity"]))
    assert sidecar.resources.limits == {"cpu": "250m", "memory": "384Mi"}
    assert sidecar.security_context.read_only_root_filesystem and sidecar.security_context.capabilities.drop == ["ALL"]

    failed = stack.wait_phase(ns, "nocls")["status"]
    assert failed["phase"] == "Failed", failed
    assert failed["error"].startswith("spec.agentSandbox.runtimeClass:") and \
        'RuntimeClass "kata-missing" not found' in failed["error"], failed["error"]
    assert stack.run_objects(ns, "nocls")["jobs"] == []


def test_sub_agents_over_the_parents_limits_fail_naming_them_and_are_linked_to_the_parent(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent("lead", subagents={"maxDepth": 1, "maxChildrenPerAgent": 2, "maxConcurrent": 5}))
    stack.create(ns, "agentruns", agent_run("boss", agent_ref="lead"))
    assert stack.wait_phase(ns, "boss")["status"]["phase"] == "Succeeded"
    parent = {"runName": "boss", "sessionKey": "s", "spawnDepth": 1}
    for name in ("kid1", "kid2"):
        stack.create(ns, "agentruns", agent_run(name, agent_ref="lead", parent=parent))
        assert stack.wait_phase(ns, name)["status"]["phase"] == "Succeeded"
    stack.create(ns, "agentruns", agent_run("kid3", agent_ref="lead", parent=parent))
    stack.create(ns, "agentruns", agent_run("deep", agent_ref="lead", parent={**parent, "spawnDepth": 2}))

    third = stack.wait_phase(ns, "kid3")["status"]
    assert third["phase"] == "Failed" and third["error"].startswith("spec.parent.runName:")
    assert 'Agent "lead" spec.agents.default.subagents.maxChildrenPerAgent' in third["error"], third["error"]
    deep = stack.wait_phase(ns, "deep")["status"]
    assert deep["phase"] == "Failed" and deep["error"].startswith("spec.parent.spawnDepth:")
    assert "subagents.maxDepth" in deep["error"], deep["error"]

    kid = stack.get_run(ns, "kid1")
    assert kid is not None and kid["metadata"]["labels"]["sympozium.ai/parent-run"] == "boss"
    link = next(c for c in kid["status"]["conditions"] if c["type"] == "SubAgent")
    assert (link["status"], link["reason"], link["message"]) == ("True", "ParentRun",
                                                                "sub-agent of AgentRun boss (spawnDepth 1)")
    boss = stack.get_run(ns, "boss")
    assert boss is not None
    assert [(r["kind"], r["name"], r["uid"]) for r in kid["metadata"]["ownerReferences"]] == [
        ("AgentRun", "boss", boss["metadata"]["uid"])]
    children: list[dict[str, Any]] = cast(dict[str, Any], stack.custom.list_namespaced_custom_object(
        "sympozium.ai", "v1alpha1", ns, "agentruns", label_selector="sympozium.ai/parent-run=boss"))["items"]
    assert {c["metadata"]["name"] for c in children} >= {"kid1", "kid2"}
    # The parent's status lists the children that started under it (not the refused ones).
    assert boss["status"]["delegates"] == [{"childRunName": "kid1"}, {"childRunName": "kid2"}]
    # The Temporal UI leads from the child's workflow to its parent's.
    boss_wid = workflow_id(RunRef(namespace=ns, name="boss", uid=boss["metadata"]["uid"]))
    desc = _describe(stack, workflow_id(RunRef(namespace=ns, name="kid1", uid=kid["metadata"]["uid"])))
    assert desc["memo"] == {"parentRun": f"{ns}/boss", "parentWorkflowId": boss_wid}
    assert f"sub-agent of AgentRun {ns}/boss (workflow {boss_wid})" in desc["details"]


def test_a_running_parent_keeps_its_list_of_children_through_its_own_status_writes(stack: Stack,
                                                                                   namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent("lead"))
    stack.create(ns, "agentruns", agent_run("boss", "sleep:6", agent_ref="lead"))
    stack.wait_phase(ns, "boss", {"Running"})
    stack.create(ns, "agentruns", agent_run("kid", agent_ref="lead",
                                            parent={"runName": "boss", "sessionKey": "s", "spawnDepth": 1}))
    assert stack.wait_phase(ns, "kid")["status"]["phase"] == "Succeeded"
    done = stack.wait_phase(ns, "boss")["status"]
    # The parent's workflow wrote its final status (conditions and all) after the child was listed.
    assert done["phase"] == "Succeeded" and done["delegates"] == [{"childRunName": "kid"}], done


def test_deleting_a_parent_cancels_its_running_children(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent("lead"))
    stack.create(ns, "agentruns", agent_run("boss", agent_ref="lead"))
    assert stack.wait_phase(ns, "boss")["status"]["phase"] == "Succeeded"
    # A child that stays in its preRun hook until cancelled.
    stack.create(ns, "agentruns", agent_run("kid", agent_ref="lead", lifecycle={"preRun": [hook("wait", "sleep 120")]},
                                            parent={"runName": "boss", "sessionKey": "s", "spawnDepth": 1}))
    kid = stack.wait_phase(ns, "kid", {"Pending", "Running"})
    wait_for(lambda: (stack.get_run(ns, "kid") or {}).get("metadata", {}).get("ownerReferences"),
             what="the child to be owned by its parent")
    wait_for(lambda: stack.run_objects(ns, "kid")["pods"], what="the child's preRun pod")
    wid = workflow_id(RunRef(namespace=ns, name="kid", uid=kid["metadata"]["uid"]))

    stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "boss")
    wait_for(lambda: stack.get_run(ns, "kid") is None, timeout=60, what="the child to be deleted with its parent")
    # The finalizer goes as the cleanup begins, so the workflow closes a moment after the object is gone.
    wait_for(lambda: stack.workflow_status(wid) == WorkflowExecutionStatus.CANCELED, timeout=30,
             what="the child's workflow to be cancelled")
    stack.wait_gone(ns, "kid")  # its cleanup ran: Jobs, pods, workspace and lifecycle RBAC are gone
