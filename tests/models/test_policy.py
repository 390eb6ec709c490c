"""SympoziumPolicy normalisation: the built-in templates, both shapes, and the rules each refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from models.agent import normalize_agent
from models.base import FieldProblem, PolicyViolation
from models.policy import ALWAYS_DENIED_ENV, TEMPLATES, PolicyRules, normalize_policy
from models.resolve import ResolvedRun, approval_tools, resolve_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
FILES = {"Permissive": "permissive.yaml", "Default": "default.yaml", "Restrictive": "restrictive.yaml"}
AGENT = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"},
                         "spec": {"agents": {"default": {"model": "m"}}}})


def example(template: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / FILES[template]).read_text())
    return doc


def rules_of(spec: dict[str, Any], name: str = "p") -> PolicyRules:
    return normalize_policy({"metadata": {"name": name}, "spec": spec})


def resolve(spec: dict[str, Any], policy: PolicyRules) -> ResolvedRun:
    obj = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "spec": {"agentRef": "helper", "task": "t", **spec}}
    return resolve_run(obj, AGENT, default_image="x", policy=policy)


def test_the_three_templates_are_the_shipped_example_policies() -> None:
    assert set(TEMPLATES) == set(FILES) == {p.name.removesuffix(".yaml").capitalize() for p in EXAMPLES.glob("*.yaml")}
    for template in TEMPLATES:
        doc = example(template)
        assert doc["kind"] == "SympoziumPolicy" and doc["metadata"]["name"] == FILES[template].removesuffix(".yaml")
        assert doc["spec"] == TEMPLATES[template], f"{FILES[template]} drifted from models.policy.TEMPLATES"


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_a_docs_shape_template_means_the_same_rules_as_its_example_file(template: str) -> None:
    from_template = rules_of({"template": template})
    from_file = normalize_policy({**example(template), "metadata": {"name": "p"}})
    assert from_template.template == template and from_file.template == ""
    assert from_template.model_copy(update={"template": ""}) == from_file


def test_templates_differ_where_the_docs_say() -> None:
    permissive, default, restrictive = (rules_of({"template": t}) for t in ("Permissive", "Default", "Restrictive"))
    assert not permissive.sandbox_required and not default.sandbox_required and restrictive.sandbox_required
    assert permissive.default_tool_action == default.default_tool_action == "allow"
    assert restrictive.default_tool_action == "deny"
    assert default.approval_tools == ["execute_command"] and permissive.approval_tools == []
    assert (permissive.max_depth, default.max_depth, restrictive.max_depth) == (5, 3, 2)
    assert restrictive.allowed_registries and not permissive.allowed_registries
    assert "secrets" in restrictive.denied_resources and not default.denied_resources


def test_a_field_the_policy_sets_replaces_the_templates_field() -> None:
    rules = rules_of({"template": "Restrictive", "subagentPolicy": {"maxDepth": 4},
                      "imagePolicy": {"allowedRegistries": ["registry.example.com/"]}})
    assert rules.max_depth == 4 and rules.max_concurrent is None  # the whole field, not merged
    assert rules.allowed_registries == ["registry.example.com/"]
    assert rules.sandbox_required and "secrets" in rules.denied_resources  # the rest is the template's


def test_docs_shape_fields_apply_on_top_of_the_template() -> None:
    rules = rules_of({"template": "Permissive", "allowedTools": ["read_file", "git"],
                      "requireApproval": ["deploy"], "sandbox": {"enabled": True, "runtimeClass": "gvisor"}})
    assert rules.default_tool_action == "deny" and rules.allowed_tools == ["read_file", "git"]
    assert rules.approval_tools == ["deploy"] and rules.sandbox_required
    # sandbox.enabled: false does not lift what the template requires
    assert rules_of({"template": "Restrictive", "sandbox": {"enabled": False}}).sandbox_required


def test_an_unknown_template_names_the_field() -> None:
    with pytest.raises(FieldProblem) as e:
        rules_of({"template": "Paranoid"})
    assert e.value.field == "spec.template" and "Permissive, Default, Restrictive" in str(e.value)
    with pytest.raises(FieldProblem) as e:
        normalize_policy({"metadata": {"name": "p"}, "spec": ["not", "a", "map"]})
    assert e.value.field == "spec"


HOOK_OK = {"name": "a", "image": "docker.io/library/busybox:1.36"}
COMPLIANT: dict[str, Any] = {"sandbox": {"enabled": True}, "toolPolicy": {"allow": ["read_file"]},
                             "lifecycle": {"preRun": [HOOK_OK]}}


@pytest.mark.parametrize(("spec", "field", "rule"), [
    ({"toolPolicy": {"allow": ["read_file", "execute_command"]}}, "spec.toolPolicy.allow[1]", "toolGating"),
    ({"toolPolicy": {"allow": ["git"]}}, "spec.toolPolicy.allow[0]", "toolGating defaultAction: deny"),
    ({"sandbox": {"enabled": False}}, "spec.sandbox.enabled", "sandboxPolicy.required"),
    ({"agentSandbox": {"enabled": True, "runtimeClass": "runc"}}, "spec.agentSandbox.runtimeClass",
     "sandboxPolicy.agentSandboxPolicy.allowedRuntimeClasses"),
    ({"lifecycle": {"preRun": [{"name": "a", "image": "busybox:1.36"}]}}, "spec.lifecycle.preRun[0].image",
     "imagePolicy.allowedRegistries"),
    ({"lifecycle": {"postRun": [{"name": "a", "image": "quay.io/x/y:1"}]}}, "spec.lifecycle.postRun[0].image",
     "imagePolicy.allowedRegistries"),
    ({"sandbox": {"enabled": True, "image": "quay.io/x/sandbox:1"}}, "spec.sandbox.image",
     "imagePolicy.allowedRegistries"),
    ({"lifecycle": {"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}},
     "spec.lifecycle.rbac[0].resources", "lifecyclePolicy.deniedResources"),
    ({"parent": {"runName": "p", "spawnDepth": 3}}, "spec.parent.spawnDepth", "subagentPolicy.maxDepth"),
])
def test_the_restrictive_template_refuses_each_rule_naming_field_and_rule(spec: dict[str, Any], field: str,
                                                                          rule: str) -> None:
    policy = rules_of({"template": "Restrictive"}, name="prod")
    with pytest.raises(PolicyViolation) as e:
        resolve({**COMPLIANT, **spec}, policy)
    assert e.value.field == field
    assert 'policy "prod" (template Restrictive)' in str(e.value) and rule in str(e.value)


def test_a_compliant_run_passes_the_restrictive_template() -> None:
    run = resolve({**COMPLIANT, "agentSandbox": {"enabled": True, "runtimeClass": "gvisor"},
                   "parent": {"runName": "p", "spawnDepth": 2}}, rules_of({"template": "Restrictive"}))
    assert run.sandbox is not None and run.sandbox.enabled


def test_an_agent_sandbox_can_be_required() -> None:
    policy = rules_of({"sandboxPolicy": {"agentSandboxPolicy": {"required": True}}})
    with pytest.raises(PolicyViolation) as e:
        resolve({}, policy)
    assert e.value.field == "spec.agentSandbox.enabled" and "agentSandboxPolicy.required" in str(e.value)


@pytest.mark.parametrize("key", ALWAYS_DENIED_ENV)
def test_always_denied_env_keys_are_a_policy_violation_even_without_a_policy(key: str) -> None:
    obj = {"metadata": {"name": "r", "namespace": "ns", "uid": "u"},
           "spec": {"agentRef": "helper", "task": "t", "env": {key: "x"}}}
    with pytest.raises(PolicyViolation) as e:
        resolve_run(obj, AGENT, default_image="x")
    assert e.value.field == f"spec.env.{key}" and "always denied" in str(e.value)


def test_policy_listed_env_keys_name_the_policy_rule() -> None:
    with pytest.raises(PolicyViolation) as e:
        resolve({"env": {"DEBUG": "1"}}, rules_of({"deniedEnv": ["DEBUG"]}, name="quiet"))
    assert e.value.field == "spec.env.DEBUG" and 'policy "quiet", rule deniedEnv' in str(e.value)


def test_other_spec_problems_are_not_policy_violations() -> None:
    with pytest.raises(FieldProblem) as e:
        resolve({"timeout": "soon"}, rules_of({"template": "Permissive"}))
    assert not isinstance(e.value, PolicyViolation)


def test_ask_tools_are_admitted_and_listed_for_a_warning() -> None:
    policy = rules_of({"template": "Default"})
    run = resolve({"toolPolicy": {"allow": ["read_file", "execute_command"]}}, policy)
    assert approval_tools(run, policy) == ["execute_command"]
    ask_all = rules_of({"toolGating": {"defaultAction": "ask", "rules": [{"tool": "read_file", "action": "allow"}]}})
    assert approval_tools(resolve({"toolPolicy": {"allow": ["read_file", "git"]}}, ask_all), ask_all) == ["git"]


def test_gate_policy_is_carried_in_either_shape_and_absent_means_no_list() -> None:
    spec = {"approvers": ["alice", "group:reviewers"], "requireDistinctApprover": True}
    for rules in (rules_of({"gatePolicy": spec}), rules_of({"template": "Default", "gatePolicy": spec})):
        assert rules.gate.approvers == ["alice", "group:reviewers"] and rules.gate.require_distinct_approver
    assert rules_of({}).gate.approvers == [] and not rules_of({}).gate.require_distinct_approver
    with pytest.raises(FieldProblem) as e:
        rules_of({"gatePolicy": {"approvers": "alice"}})
    assert e.value.field == "spec.gatePolicy.approvers"


def test_only_listed_identities_or_groups_may_decide_and_never_the_creator_when_distinct() -> None:
    gate = rules_of({"gatePolicy": {"approvers": ["alice", "bob", "group:reviewers"],
                                    "requireDistinctApprover": True}}, "review").gate
    assert gate.refusal("bob", creator="alice", policy="review") is None
    assert gate.refusal("carol", ["reviewers"], creator="alice", policy="review") is None
    outsider = gate.refusal("mallory", ["system:authenticated"], creator="alice", policy="review")
    assert outsider is not None and outsider.rule == "gatePolicy.approvers"
    assert '"mallory"' in outsider.message and 'policy "review" (gatePolicy.approvers)' in outsider.message
    creator = gate.refusal("alice", creator="alice", policy="review")
    assert creator is not None and creator.rule == "gatePolicy.requireDistinctApprover"
    assert "(gatePolicy.requireDistinctApprover)" in creator.message
    # Without a list anyone may decide; requireDistinctApprover alone still keeps the creator out.
    open_gate = rules_of({"gatePolicy": {"requireDistinctApprover": True}}).gate
    assert open_gate.refusal("anyone", creator="alice", policy="p") is None
    assert open_gate.refusal("alice", creator="alice", policy="p") is not None
    assert open_gate.refusal("alice", creator=None, policy="p") is None


def test_an_identity_named_like_a_group_entry_is_no_member_of_that_group() -> None:
    """Users and groups are matched as what they are (issue 27, hole 12): an identity literally named
    "group:reviewers" does not pass `group:reviewers`, and a group named like an approving user does not either."""
    gate = rules_of({"gatePolicy": {"approvers": ["alice", "group:reviewers"]}}, "review").gate
    spoof = gate.refusal("group:reviewers", creator=None, policy="review")
    assert spoof is not None and spoof.rule == "gatePolicy.approvers"
    assert gate.refusal("mallory", ["alice"], creator=None, policy="review") is not None
    assert gate.refusal("carol", ["reviewers"], creator=None, policy="review") is None
    assert gate.refusal("alice", creator=None, policy="review") is None
