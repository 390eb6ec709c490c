"""Every example in examples/ runs on the stack and does what its comment says."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from kubernetes import client, utils
from kubernetes.client.rest import ApiException
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from models.gate import Verdict
from models.policy import normalize_policy
from tests.e2e.conftest import Stack
from tests.waiting import wait_for
from workflows.agent_run import AgentRunWorkflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLURALS = {"Agent": "agents", "AgentRun": "agentruns", "SympoziumSchedule": "sympoziumschedules",
           "SkillPack": "skillpacks"}


def apply(stack: Stack, ns: str, *names: str) -> None:
    for name in ("agent.yaml", *names):
        for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
            if not doc:
                continue
            if doc["kind"] in PLURALS:
                try:
                    stack.create(ns, PLURALS[doc["kind"]], doc)
                except ApiException as e:
                    if e.status != 409:
                        raise
            else:
                utils.create_from_dict(stack.api, doc, namespace=ns)


def status(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    return dict(stack.wait_phase(ns, name, timeout=90)["status"])


def test_prerun_context_reaches_the_agent(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "prerun-context.yaml")
    st = status(stack, namespace, "summarize-release")
    assert st["phase"] == "Succeeded"
    assert "context notes.txt: v2.4.0: faster startup" in st["result"]


def test_postrun_report_writes_a_configmap_from_the_result(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "postrun-report.yaml")
    assert status(stack, namespace, "weekly-report")["phase"] == "Succeeded"
    cm: Any = client.CoreV1Api(stack.api).read_namespaced_config_map("report-weekly-report", namespace)
    assert cm.data["team"] == "platform" and cm.data["exit-code"] == "0"
    assert cm.data["result"].startswith("echo: Write the weekly status report.")


def test_rbac_example_creates_then_removes_its_scratch_configmap_and_its_role(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "rbac-configmap.yaml")
    assert status(stack, namespace, "scratch-space")["phase"] == "Succeeded"
    core, rbac = client.CoreV1Api(stack.api), client.RbacAuthorizationV1Api(stack.api)
    items: list[Any] = core.list_namespaced_config_map(namespace).items
    names = [c.metadata.name for c in items]
    assert "scratch-scratch-space" not in names
    wait_for(lambda: not rbac.list_namespaced_role(namespace).items, what="the run's Role to be removed")


def test_pii_gate_rejects_a_response_with_an_email_address(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "pii-gate.yaml")
    st = status(stack, namespace, "customer-reply")
    assert st["phase"] == "Succeeded" and st["gateVerdict"] == "rejected"
    assert st["result"] == "[redacted: the draft contained personal data]"
    assert st["gate"]["reason"] == "pii-scan: personal data found"


def test_retry_gate_sends_the_answer_back_once_and_approves_the_signed_off_one(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "retry-gate.yaml")
    st = status(stack, namespace, "style-check")
    assert (st["phase"], st["gateVerdict"], st["attempt"]) == ("Succeeded", "approved", 2), st
    assert st["result"].startswith("echo: Write a two-line release note for v2.4.0.")
    assert "Signed-off-by: release-bot" in st["result"]
    assert [(a["verdict"], a["reason"]) for a in st["attempts"]] == [("retried", "style: no sign-off"),
                                                                    ("approved", "style: signed off")]


async def test_manual_approval_waits_for_a_person(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "manual-approval.yaml")
    run = stack.wait_phase(namespace, "weekly-summary", {"PostRunning"}, timeout=60)
    wait_for(lambda: ((stack.get_run(namespace, "weekly-summary") or {}).get("status", {}).get("gate") or {})
             .get("state") == "pending", what="the gate to wait")
    temporal = await Client.connect(stack.temporal.address, data_converter=pydantic_data_converter)
    view = await temporal.get_workflow_handle(run["status"]["workflowId"]).execute_update(
        AgentRunWorkflow.submit_verdict, Verdict(action="approve", decided_by="lead@example.com"))
    assert view.gate_verdict == "approved"
    st = status(stack, namespace, "weekly-summary")
    assert st["gateVerdict"] == "approved" and st["result"].startswith("echo: Summarize this week")


def test_schedules_example_runs_a_heartbeat_now_and_a_report_at_nine_paris_time(stack: Stack, namespace: str) -> None:
    apply(stack, namespace, "schedules.yaml")

    def schedule_status(name: str) -> dict[str, Any] | None:
        obj: Any = stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", namespace,
                                                             "sympoziumschedules", name)
        st = obj.get("status") or {}
        return st if st.get("phase") == "Active" and st.get("nextRunTime") else None

    beat = wait_for(lambda: schedule_status("health-check"), timeout=30, what="health-check Active")
    report = wait_for(lambda: schedule_status("cost-report"), timeout=30, what="cost-report Active")
    assert beat["nextRunTime"][14:16] in ("00", "15", "30", "45")
    paris = datetime.fromisoformat(report["nextRunTime"].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Paris"))
    assert (paris.hour, paris.minute, paris.weekday() < 5) == (9, 0, True)
    # firstTick: immediate — the heartbeat ran once on creation, named by its tick.
    def first_run() -> dict[str, Any] | None:
        out: Any = stack.custom.list_namespaced_custom_object(
            "sympozium.ai", "v1alpha1", namespace, "agentruns", label_selector="sympozium.ai/schedule=health-check")
        return next(iter(out["items"]), None)

    first = wait_for(first_run, timeout=30, what="the heartbeat's first run")
    assert first["metadata"]["name"].startswith("health-check-20")
    assert status(stack, namespace, first["metadata"]["name"])["phase"] == "Succeeded"


def test_policy_examples_are_stored_whole_and_mean_their_templates(stack: Stack, namespace: str) -> None:
    """examples/policies/ are the built-in templates: `template: Restrictive` means restrictive.yaml."""
    files = sorted((EXAMPLES / "policies").glob("*.yaml"))
    assert [f.name for f in files] == ["default.yaml", "permissive.yaml", "restrictive.yaml"]
    for path in files:
        doc = yaml.safe_load(path.read_text())
        stored = stack.create(namespace, "sympoziumpolicies", doc)
        assert stored["spec"] == doc["spec"], f"{path.name}: the CRD schema dropped or changed a field"
        template = normalize_policy({"metadata": doc["metadata"], "spec": {"template": path.stem.capitalize()}})
        assert normalize_policy(stored) == template.model_copy(update={"template": ""}), path.name


def test_the_restrictive_example_refuses_a_run_without_a_sandbox_and_admits_one_with(stack: Stack,
                                                                                     namespace: str) -> None:
    doc = yaml.safe_load((EXAMPLES / "policies" / "restrictive.yaml").read_text())
    stack.create(namespace, "sympoziumpolicies", doc)
    guarded = yaml.safe_load((EXAMPLES / "agent.yaml").read_text())
    guarded["spec"]["policyRef"] = "restrictive"
    stack.create(namespace, "agents", guarded)
    agent_name = guarded["metadata"]["name"]
    run: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                           "spec": {"agentRef": agent_name, "task": "List the files.", "toolPolicy": {"allow": ["list_directory"]}}}
    stack.create(namespace, "agentruns", {**run, "metadata": {"name": "unsandboxed"}})
    stack.create(namespace, "agentruns", {**run, "metadata": {"name": "sandboxed"},
                                          "spec": {**run["spec"], "sandbox": {"enabled": True}}})
    refused = status(stack, namespace, "unsandboxed")
    assert refused["phase"] == "Failed" and refused["error"].startswith("spec.sandbox.enabled:")
    assert 'policy "restrictive"' in refused["error"] and "sandboxPolicy.required" in refused["error"]
    assert status(stack, namespace, "sandboxed")["phase"] == "Succeeded"


def test_the_offline_k8s_ops_example_counts_the_nodes_through_its_sidecar(stack: Stack, namespace: str) -> None:
    """The first hour's agent that acts, without a model: the echo model's scripted calls run in the k8s-ops sidecar
    with the run's own cluster RBAC, and the answer carries what kubectl said."""
    apply(stack, namespace, "k8s-ops-offline.yaml")
    nodes: Any = client.CoreV1Api(stack.api).list_node().items
    st = status(stack, namespace, "nodes-offline")
    assert st["phase"] == "Succeeded", st
    assert f"tool execute_command (ok): {len(nodes)}" in st["result"], st["result"]
    listed = "\n".join(f"node/{n.metadata.name}" for n in nodes)
    assert f"tool k8s_get_nodes (ok): {listed}" in st["result"], st["result"]
    assert st["tokenUsage"]["toolCalls"] == 2
