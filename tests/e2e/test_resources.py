"""Container resources (issue 12): the run's pods carry requests and limits from the Agent (or the run's
`spec.sandbox.resources`) over the defaults, under the policy's `sandboxPolicy.maxCPU`/`maxMemory`; a run asking for
more than its policy allows fails at workflow start without the webhook and is refused at admission with it, both
naming the field."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Stack, agent, agent_run, hook
from tests.e2e.test_gate_authority import authority_api, protected, refused

__all__ = ["authority_api", "protected"]  # fixtures: the API process and its webhooks registered for the namespace
SMALL = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": "small"},
         "spec": {"sandboxPolicy": {"maxCPU": "1", "maxMemory": "512Mi"}}}
HOOK_DEFAULT = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}


def resources_of(stack: Stack, ns: str, run: str, component: str) -> dict[str, dict[str, Any]]:
    """Container name → resources, of the run's pod of `component`, as localkube stores it."""
    pods = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={run},sympozium.ai/component={component}").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    spec = pods[0].spec
    return {c.name: {"requests": c.resources.requests, "limits": c.resources.limits}
            for c in [*(spec.init_containers or []), *spec.containers]}


def test_agent_and_hook_pods_carry_requests_and_limits(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "agents", agent(resources={"requests": {"memory": "300Mi"}, "limits": {"cpu": 2,
                                                                                          "memory": "768Mi"}}))
    stack.create(ns, "agentruns", agent_run("sized", cleanup="keep",
                                            lifecycle={"postRun": [hook("report", "true")]}))
    assert stack.wait_phase(ns, "sized", timeout=90)["status"]["phase"] == "Succeeded"
    agent_pod = resources_of(stack, ns, "sized", "agent-run")
    assert agent_pod["agent"] == {"requests": {"cpu": "100m", "memory": "300Mi"},
                                  "limits": {"cpu": "2", "memory": "768Mi"}}
    post = resources_of(stack, ns, "sized", "post-run")
    assert post["post-report"] == HOOK_DEFAULT
    assert all(r["limits"] and r["requests"] for r in post.values()), post


def test_a_run_over_the_policys_max_memory_fails_at_start_naming_the_field(stack: Stack, namespace: str) -> None:
    ns = namespace
    stack.create(ns, "sympoziumpolicies", SMALL)
    stack.create(ns, "agents", {**agent(), "spec": {**agent()["spec"], "policyRef": "small"}})
    stack.create(ns, "agentruns", agent_run("greedy", sandbox={"resources": {"limits": {"memory": "1Gi"}}}))
    stack.create(ns, "agentruns", agent_run("capped", cleanup="keep"))
    status = stack.wait_phase(ns, "greedy")["status"]
    assert status["phase"] == "Failed", status
    assert status["error"] == ('spec.sandbox.resources.limits.memory: memory 1Gi exceeds the maximum 512Mi of policy '
                               '"small", rule sandboxPolicy.maxMemory'), status["error"]
    assert stack.run_objects(ns, "greedy")["jobs"] == []
    # The defaults above the cap are lowered to it: the same policy runs a run that asks nothing.
    assert stack.wait_phase(ns, "capped", timeout=90)["status"]["phase"] == "Succeeded"
    assert resources_of(stack, ns, "capped", "agent-run")["agent"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}


def test_a_run_over_the_policys_max_memory_is_refused_at_admission(stack: Stack, protected: str) -> None:
    ns = protected
    stack.create(ns, "sympoziumpolicies", SMALL)
    stack.create(ns, "agents", {**agent(), "spec": {**agent()["spec"], "policyRef": "small"}})
    message = refused(lambda: stack.create(ns, "agentruns", agent_run(
        "greedy", sandbox={"resources": {"limits": {"memory": "1Gi"}}})))
    assert 'denied the request: spec.sandbox.resources.limits.memory: memory 1Gi exceeds the maximum 512Mi of ' \
           'policy "small", rule sandboxPolicy.maxMemory' in message, message
    assert stack.get_run(ns, "greedy") is None
