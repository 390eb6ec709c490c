"""nodeSelector through the real path (issue 26, item 4): an Agent's `agents.default.nodeSelector`, or a run's
`model.nodeSelector` in its place, reaches the agent pod's spec, and localkube schedules the pod as kube-scheduler
would on its one node (localkube/scheduler.py): a selector the node does not match leaves the pod Pending and
unbound, saying why, and the run waits; labelling the node lets it run to the end."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for


def agent_pod(stack: Stack, ns: str, run: str) -> Any:
    pods = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={run},sympozium.ai/component=agent-run").items
    return pods[0] if len(pods) == 1 else None


def unschedulable(pod: Any) -> Any:
    return next((c for c in (pod.status.conditions or []) if c.type == "PodScheduled" and c.status == "False"
                 and c.reason == "Unschedulable"), None) if pod is not None and pod.status else None


def test_the_agents_node_selector_places_the_agent_pod_and_a_run_may_replace_it(stack: Stack, namespace: str) -> None:
    ns = namespace
    key = f"pool.e2e.agentrun.test/{ns}"  # this test's own node label: the node is shared by the session's tests
    stack.create(ns, "agents", agent(nodeSelector={key: "gpu"}))
    stack.create(ns, "agentruns", agent_run("placed", cleanup="keep"))
    pod = wait_for(lambda: (lambda p: p if unschedulable(p) else None)(agent_pod(stack, ns, "placed")), timeout=90,
                   what="the agent pod left unscheduled")
    assert pod.spec.node_selector == {key: "gpu"}
    assert pod.status.phase == "Pending" and not pod.spec.node_name
    run = stack.get_run(ns, "placed")
    assert run is not None and (run.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    try:
        stack.core.patch_node("localkube", {"metadata": {"labels": {key: "gpu"}}})
        assert stack.wait_phase(ns, "placed", timeout=90)["status"]["phase"] == "Succeeded"
        assert agent_pod(stack, ns, "placed").spec.node_name == "localkube"
    finally:
        stack.core.patch_node("localkube", {"metadata": {"labels": {key: None}}})
    # The run's model.nodeSelector replaces the Agent's (the node has no `key` label again): it runs at once.
    stack.create(ns, "agentruns", agent_run("moved", cleanup="keep",
                                            model={"nodeSelector": {"kubernetes.io/hostname": "localkube"}}))
    assert stack.wait_phase(ns, "moved", timeout=90)["status"]["phase"] == "Succeeded"
    moved = agent_pod(stack, ns, "moved")
    assert moved.spec.node_selector == {"kubernetes.io/hostname": "localkube"}
    assert moved.spec.node_name == "localkube"
