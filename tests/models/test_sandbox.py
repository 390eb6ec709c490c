"""Sandboxes and sub-agent limits at resolution (issue 14 items 4-5): asked-for isolation is given or the run fails
naming the field, and a sub-agent over its parent's limits fails naming the limit."""

from __future__ import annotations

from typing import Any

import pytest

from models.agent import normalize_agent
from models.base import FieldProblem, PolicyViolation
from models.compat import ignored_fields
from models.evaluate import evaluate_run
from models.policy import normalize_policy
from models.resolve import DEFAULT_SANDBOX_IMAGE, ResolvedRun, resolve_run

AGENT_OBJ: dict[str, Any] = {
    "apiVersion": "sympozium.ai/v1alpha1", "kind": "Agent", "metadata": {"name": "helper", "namespace": "ns"},
    "spec": {"authRefs": [{"provider": "openai", "secret": "key"}],
             "agents": {"default": {"model": "gpt", "subagents": {"maxDepth": 2, "maxConcurrent": 2,
                                                                   "maxChildrenPerAgent": 3}}}},
}
AGENT = normalize_agent(AGENT_OBJ)


def run_obj(spec: dict[str, Any], name: str = "r1", created: str = "2026-01-01T00:00:10Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"agentRef": "helper", "task": "do", **spec}}


def resolve(spec: dict[str, Any], policy: dict[str, Any] | None = None) -> ResolvedRun:
    rules = normalize_policy({"metadata": {"name": "p"}, "spec": policy}) if policy is not None else None
    return resolve_run(run_obj(spec), AGENT, default_image="agent:1", policy=rules)


def test_agent_sandbox_gives_the_runtime_class_and_the_policy_default_fills_it() -> None:
    assert resolve({"agentSandbox": {"enabled": True, "runtimeClass": "gvisor"}}).runtime_class_name == "gvisor"
    assert resolve({"agentSandbox": {"enabled": False, "runtimeClass": "gvisor"}}).runtime_class_name == ""
    policy = {"sandboxPolicy": {"agentSandboxPolicy": {"defaultRuntimeClass": "kata"}}}
    assert resolve({"agentSandbox": {"enabled": True}}, policy).runtime_class_name == "kata"


@pytest.mark.parametrize(("spec", "field", "text"), [
    ({"agentSandbox": {"enabled": True}}, "spec.agentSandbox.runtimeClass", "required"),
    ({"agentSandbox": {"enabled": True, "runtimeClass": "Not_A_Name"}}, "spec.agentSandbox.runtimeClass",
     "not a RuntimeClass name"),
    ({"agentSandbox": {"enabled": True, "runtimeClass": "gvisor", "warmPoolRef": "pool"}},
     "spec.agentSandbox.warmPoolRef", "not offered"),
    ({"sandbox": {"enabled": True, "securityContext": {"seccompProfile": {"type": "Bogus"}}}},
     "spec.sandbox.securityContext.seccompProfile.type", "RuntimeDefault"),
    ({"parent": {"spawnDepth": 1}}, "spec.parent.runName", "required"),
    ({"parent": {"runName": "p", "spawnDepth": 0}}, "spec.parent.spawnDepth", "at least 1"),
])
def test_isolation_that_cannot_be_given_fails_naming_the_field(spec: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(FieldProblem) as e:
        resolve(spec)
    assert e.value.field == field and text in str(e.value)


def test_the_policy_lists_the_runtime_classes_and_can_require_one() -> None:
    allowed = {"sandboxPolicy": {"agentSandboxPolicy": {"allowedRuntimeClasses": ["gvisor"], "required": True}}}
    assert resolve({"agentSandbox": {"enabled": True, "runtimeClass": "gvisor"}}, allowed).runtime_class_name == "gvisor"
    with pytest.raises(PolicyViolation) as e:
        resolve({"agentSandbox": {"enabled": True, "runtimeClass": "kata"}}, allowed)
    assert e.value.field == "spec.agentSandbox.runtimeClass" and "allowedRuntimeClasses (gvisor)" in str(e.value)
    with pytest.raises(PolicyViolation) as e:
        resolve({}, allowed)
    assert e.value.field == "spec.agentSandbox.enabled" and "agentSandboxPolicy.required" in str(e.value)


def test_the_sandbox_sidecar_takes_the_runs_image_else_the_policys_else_sympoziums_under_the_caps() -> None:
    plain = resolve({"sandbox": {"enabled": True}})
    assert plain.sandbox_sidecar is not None and plain.sandbox_sidecar.image == DEFAULT_SANDBOX_IMAGE
    assert plain.sandbox_sidecar.resources.wire() == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                                      "limits": {"cpu": "500m", "memory": "512Mi"}}
    policy = {"sandboxPolicy": {"required": True, "defaultImage": "reg.example/sandbox:2", "maxCPU": "250m",
                                "maxMemory": "384Mi", "seccompProfile": {"type": "Unconfined"}}}
    capped = resolve({"sandbox": {"enabled": True, "imagePullPolicy": "Never"}}, policy)
    assert capped.sandbox_sidecar is not None
    assert capped.sandbox_sidecar.image == "reg.example/sandbox:2" and capped.sandbox_sidecar.image_pull_policy == "Never"
    assert capped.sandbox_sidecar.resources.wire() == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                                       "limits": {"cpu": "250m", "memory": "384Mi"}}
    assert capped.seccomp_profile == "Unconfined"
    own = resolve({"sandbox": {"enabled": True, "image": "mine:1"}}, policy)
    assert own.sandbox_sidecar is not None and own.sandbox_sidecar.image == "mine:1"
    assert resolve({"sandbox": {"enabled": False}}).sandbox_sidecar is None
    with pytest.raises(PolicyViolation) as e:
        resolve({}, policy)
    assert e.value.field == "spec.sandbox.enabled" and "sandboxPolicy.required" in str(e.value)


# -- sub-agents ------------------------------------------------------------------------------------

PARENT = run_obj({}, name="parent", created="2026-01-01T00:00:00Z")


def child(name: str, created: str, depth: int = 1, phase: str | None = None) -> dict[str, Any]:
    obj = run_obj({"parent": {"runName": "parent", "sessionKey": "s", "spawnDepth": depth}}, name=name,
                  created=created)
    if phase:
        obj["status"] = {"phase": phase}
    return obj


async def evaluate(run: dict[str, Any], others: list[dict[str, Any]], policy: dict[str, Any] | None = None) -> Any:
    objects: dict[tuple[str, str], dict[str, Any]] = {("agents", "helper"): AGENT_OBJ}
    for r in [PARENT, *others]:
        objects[("agentruns", r["metadata"]["name"])] = r
    if policy is not None:
        objects[("agents", "helper")] = {**AGENT_OBJ, "spec": {**AGENT_OBJ["spec"], "policyRef": "p"}}
        objects[("sympoziumpolicies", "p")] = {"metadata": {"name": "p"}, "spec": policy}

    async def read(plural: str, name: str) -> dict[str, Any] | None:
        return objects.get((plural, name))

    async def list_runs() -> list[dict[str, Any]]:
        return [PARENT, *others, run]

    return await evaluate_run(run, read=read, default_image="agent:1", list_runs=list_runs)


async def test_a_sub_agent_deeper_than_the_parents_agent_allows_fails_naming_max_depth() -> None:
    assert (await evaluate(child("c1", "2026-01-01T00:00:01Z", depth=2), [])).problem is None
    ev = await evaluate(child("c1", "2026-01-01T00:00:01Z", depth=3), [])
    assert isinstance(ev.problem, PolicyViolation) and ev.problem.field == "spec.parent.spawnDepth"
    assert 'Agent "helper" spec.agents.default.subagents.maxDepth' in str(ev.problem)
    ev = await evaluate(child("c1", "2026-01-01T00:00:01Z", depth=2), [], policy={"subagentPolicy": {"maxDepth": 1}})
    assert ev.problem is not None and "subagentPolicy.maxDepth" in str(ev.problem)
    ev = await evaluate(child("c1", "2026-01-01T00:00:01Z"), [], policy={"featureGates": {"sub-agents": False}})
    assert ev.problem is not None and "featureGates.sub-agents" in str(ev.problem)


async def test_the_child_over_max_children_per_agent_fails_and_earlier_ones_do_not() -> None:
    kids = [child(f"c{i}", f"2026-01-01T00:00:0{i}Z", phase="Succeeded") for i in range(1, 5)]
    for k in kids[:3]:
        assert (await evaluate(k, [x for x in kids if x is not k])).problem is None  # only older siblings count
    ev = await evaluate(kids[3], kids[:3])
    assert isinstance(ev.problem, PolicyViolation) and ev.problem.field == "spec.parent.runName"
    assert "maxChildrenPerAgent" in str(ev.problem) and 'parent run "parent" already has 3 sub-agents' in str(ev.problem)


async def test_unfinished_siblings_count_against_max_concurrent() -> None:
    kids = [child("c1", "2026-01-01T00:00:01Z", phase="Running"), child("c2", "2026-01-01T00:00:02Z")]
    ev = await evaluate(child("c3", "2026-01-01T00:00:03Z"), kids)
    assert ev.problem is not None and "maxConcurrent" in str(ev.problem) and "2 unfinished" in str(ev.problem)
    kids[0]["status"]["phase"] = "Failed"
    assert (await evaluate(child("c3", "2026-01-01T00:00:03Z"), kids)).problem is None


async def test_a_missing_parent_fails_naming_the_field() -> None:
    orphan = run_obj({"parent": {"runName": "nobody", "spawnDepth": 1}})
    ev = await evaluate(orphan, [])
    assert ev.problem is not None and ev.problem.field == "spec.parent.runName" and "not found" in str(ev.problem)


async def test_a_missing_runtime_class_fails_naming_the_field() -> None:
    async def read(plural: str, name: str) -> dict[str, Any] | None:
        return AGENT_OBJ if (plural, name) == ("agents", "helper") else None

    async def exists(name: str) -> bool:
        return name == "gvisor"

    spec = {"agentSandbox": {"enabled": True, "runtimeClass": "gvisor"}}
    ok = await evaluate_run(run_obj(spec), read=read, default_image="a:1", runtime_class_exists=exists)
    assert ok.problem is None and ok.resolved is not None and ok.resolved.runtime_class_name == "gvisor"
    spec["agentSandbox"]["runtimeClass"] = "kata"
    ev = await evaluate_run(run_obj(spec), read=read, default_image="a:1", runtime_class_exists=exists)
    assert ev.problem is not None and ev.problem.field == "spec.agentSandbox.runtimeClass"
    assert 'RuntimeClass "kata" not found' in str(ev.problem)


def test_the_sub_agents_feature_gate_is_honoured_so_it_is_not_reported_as_ignored() -> None:
    gates: dict[str, bool] = {"sub-agents": False}
    policy = {"metadata": {"name": "p"}, "spec": {"featureGates": gates}}
    assert ignored_fields(run_obj({}), AGENT_OBJ, policy) == []
    gates["browser-automation"] = False
    assert ignored_fields(run_obj({}), AGENT_OBJ, policy) == ['SympoziumPolicy "p" spec.featureGates: has no effect '
                                                              "here (no feature is switched off here)"]


def test_a_run_without_its_own_sandboxes_gets_its_agents_and_agent_sandbox_resources_size_the_agent() -> None:
    boxed = normalize_agent({**AGENT_OBJ, "spec": {**AGENT_OBJ["spec"], "agents": {"default": {
        "model": "gpt", "sandbox": {"enabled": True, "image": "agent-default-sandbox:1"},
        "agentSandbox": {"enabled": True, "runtimeClass": "kata"}}}}})
    r = resolve_run(run_obj({}), boxed, default_image="agent:1")
    assert r.runtime_class_name == "kata"
    assert r.sandbox_sidecar is not None and r.sandbox_sidecar.image == "agent-default-sandbox:1"
    own = resolve_run(run_obj({"sandbox": {"enabled": False}, "agentSandbox": {
        "enabled": True, "runtimeClass": "gvisor", "resources": {"limits": {"memory": "2Gi"}}}}), boxed,
        default_image="agent:1")
    assert own.runtime_class_name == "gvisor" and own.sandbox_sidecar is None  # the run's own win
    assert own.resources.limits["memory"] == "2Gi"
