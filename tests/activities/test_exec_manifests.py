"""Where the agent's commands run, and what the agent container is told (SPEC §9): the key stays with the model
call, every target is wrapped by the executor, and the Agent's, policy's and packs' tool settings reach the agent
in the variables agentrunner reads."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from activities import skill_manifests as skm
from activities.manifests import agent_job
from agentrunner.executor import wrap
from agentrunner.policy import ToolPolicy
from agentrunner.tools.mcp import servers_from_env
from agentrunner.tools.sidecar import manifest_from_env
from models.agent import normalize_agent
from models.base import FieldProblem, PolicyViolation
from models.policy import normalize_policy
from models.resolve import ResolvedRun, resolve_run
from models.skills import resolve_skills

KEYED = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {
    "authRefs": [{"provider": "openai", "secret": "model-key"}], "agents": {"default": {"model": "gpt"}},
    "mcpServers": [
        {"name": "k8s-tools", "url": "http://mcp.tools.svc:8080/mcp", "toolsPrefix": "k8s", "timeout": 20,
         "authSecret": "mcp-token", "headers": {"X-Team": "sre"}, "toolsAllow": ["get_pods"]},
        {"name": "docs", "url": "https://docs.example/mcp", "toolsPrefix": "docs", "authSecret": "docs-key",
         "authKey": "bearer"},
        {"name": "elsewhere", "toolsPrefix": "x"}]}})  # no url: an MCPServer resource, not served here
OPS: dict[str, Any] = {"metadata": {"name": "ops"}, "spec": {"skills": [{"name": "s", "content": "x"}], "sidecar": {
    "image": "ops:1", "command": ["sleep", "infinity"],
    "clusterRBAC": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
    "tools": [{"name": "count_nodes", "description": "How many nodes", "exec": ["kubectl", "get", "nodes"],
               "positionalArgs": ["selector"]}]}}}


def resolved(agent: Any = KEYED, policy: Any = None, **spec: Any) -> ResolvedRun:
    obj = {"metadata": {"name": "run1", "namespace": "ns", "uid": "0123456789abcdef"},
           "spec": {"agentRef": "helper", "task": "do", **spec}}
    return resolve_run(obj, agent, default_image="agent:1", policy=policy)


def pod_of(run: ResolvedRun) -> dict[str, Any]:
    spec: dict[str, Any] = agent_job(run, workflow_id="wf")["spec"]["template"]["spec"]
    return spec


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env") or []}


def test_commands_run_in_a_tools_container_that_holds_no_key_no_token_and_not_the_agents_tmp() -> None:
    run = resolved().model_copy(update={"tools_image": "agent:tools"})
    pod = pod_of(run)
    [tools] = pod["initContainers"]
    assert tools == {
        "name": "tools", "image": "agent:tools", "restartPolicy": "Always", "command": wrap("tools", []),
        "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}, {"name": "exec-tmp", "mountPath": "/tmp"},
                         {"name": "exec", "mountPath": "/agentrun/exec/tools", "subPath": "tools"}],
        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}}
    [agent] = pod["containers"]
    env = env_of(agent)
    assert (env["EXEC_TARGETS"], env["EXEC_DEFAULT_TARGET"]) == ("tools", "tools")
    assert {"name": "exec", "mountPath": "/agentrun/exec"} in agent["volumeMounts"]
    assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "sympozium-agent"
    assert pod.get("shareProcessNamespace") is None, "each container in a PID namespace of its own"
    assert any(e["name"] == "OPENAI_API_KEY" for e in agent["env"]), "the agent holds the key"
    assert pod_of(resolved())["initContainers"][0]["image"] == "agent:1", "without the worker's tools image: the run's"


def test_no_container_but_the_agent_can_read_the_model_key() -> None:
    run = resolved(skills=["ops"])
    run.skill_packs = resolve_skills(run.skills, {"ops": OPS}, field="spec.skills")
    for sandbox in (False, True):
        if sandbox:
            run = run.model_copy(update={"sandbox_sidecar": resolved(sandbox={"enabled": True}).sandbox_sidecar})
        pod = pod_of(run)
        others = pod["initContainers"]
        assert [c["name"] for c in others] == ["sandbox" if sandbox else "tools", "skill-ops"]
        for c in others:
            assert "envFrom" not in c
            refs = [e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env") or [] if "valueFrom" in e]
            assert "model-key" not in refs and "mcp-token" not in refs, c["name"]
            assert not any(m["mountPath"] in ("/agentrun/state", "/agentrun/exec") for m in c["volumeMounts"])
            assert any(m["name"] == "exec" and m["subPath"] == c["command"][4].rsplit("/", 1)[1]
                       for m in c["volumeMounts"]), "a target sees its own directory only"
        assert env_of(pod["containers"][0])["EXEC_DEFAULT_TARGET"] == ("sandbox" if sandbox else "tools")


def test_a_packs_sidecar_runs_its_command_under_the_executor_with_its_params_and_offers_its_tools() -> None:
    run = resolved(skills=[{"skillPackRef": "ops", "params": {"cluster": "prod", "region": "eu-1"}}])
    run.skill_packs = resolve_skills(run.skills, {"ops": OPS}, field="spec.skills")
    pod = pod_of(run)
    [_tools, sidecar] = pod["initContainers"]
    assert sidecar["command"] == wrap("ops", ["sleep", "infinity"])
    assert [e for e in sidecar["env"] if e["name"].startswith("SKILL_")] == [
        {"name": "SKILL_PACK", "value": "ops"}, {"name": "SKILL_CLUSTER", "value": "prod"},
        {"name": "SKILL_REGION", "value": "eu-1"}]
    env = env_of(pod["containers"][0])
    assert env["SYMPOZIUM_SKILL_TARGETS"] == "ops"
    assert json.loads(env["AGENT_SKILL_PARAMS"]) == {"ops": {"cluster": "prod", "region": "eu-1"}}
    # The manifest is what the agent reads, in Sympozium's shape, the target the pack's (never the tool's own say).
    [tool] = manifest_from_env(env)
    assert tool == {"name": "count_nodes", "description": "How many nodes", "target": "ops",
                    "exec": ["kubectl", "get", "nodes"], "inputMode": "args", "positionalArgs": ["selector"],
                    "parameters": {"type": "object", "properties": {}}}


def test_a_skills_param_that_makes_no_env_name_fails_the_run_naming_it() -> None:
    run = resolved(skills=[{"skillPackRef": "ops", "params": {"bad key": "x"}}])
    with pytest.raises(FieldProblem, match=r"^spec\.skills\[0\]\.params\.bad key: "):
        resolve_skills(run.skills, {"ops": OPS}, field="spec.skills")


def test_a_packs_cluster_rbac_is_a_cluster_role_of_this_run_bound_to_its_sidecar_alone() -> None:
    run = resolved(skills=["ops"])
    run.skill_packs = resolve_skills(run.skills, {"ops": OPS}, field="spec.skills")
    role, binding = skm.sidecar_cluster_rbac(run, run.sidecars[0])
    name = "sympozium-skill-ops-ns-run1-01234567"
    assert role["kind"] == "ClusterRole" and binding["kind"] == "ClusterRoleBinding"
    for obj in (role, binding):
        assert obj["metadata"]["name"] == name and "ownerReferences" not in obj["metadata"]
        assert obj["metadata"]["labels"] == {
            "sympozium.ai/agent-run": "run1", "agentrun.dev/run-uid": "0123456789abcdef",
            "agentrun.dev/run-namespace": "ns", "sympozium.ai/component": "skill",
            "app.kubernetes.io/managed-by": "agentrun", "sympozium.ai/skill": "ops"}
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sympozium-skill-ops-run1", "namespace": "ns"}]
    plain = resolved(skills=["ops"])
    plain.skill_packs = resolve_skills(plain.skills, {"ops": {**OPS, "spec": {**OPS["spec"], "sidecar": {
        "image": "ops:1"}}}}, field="spec.skills")
    assert skm.sidecar_cluster_rbac(plain, plain.sidecars[0]) == []


def test_a_packs_cluster_rbac_passes_the_lifecycle_policys_denials() -> None:
    policy = normalize_policy({"metadata": {"name": "strict"}, "spec": {"lifecyclePolicy": {
        "deniedResources": ["nodes"]}}})
    run = resolved(skills=["ops"])
    with pytest.raises(PolicyViolation, match=r'sidecar RBAC \(spec\.sidecar\.clusterRBAC\[0\]\) access to "nodes" '
                                              r'is denied by policy "strict"'):
        resolve_skills(run.skills, {"ops": OPS}, field="spec.skills", policy=policy)


def test_the_agents_mcp_servers_reach_it_with_their_tokens_by_reference() -> None:
    env = env_of(pod_of(resolved())["containers"][0])
    servers = json.loads(env["AGENT_MCP_SERVERS"])
    assert servers == [
        {"name": "k8s-tools", "url": "http://mcp.tools.svc:8080/mcp", "toolsPrefix": "k8s",
         "authEnv": "MCP_AUTH_K8S_TOOLS", "timeout": 20, "headers": {"X-Team": "sre"}, "toolsAllow": ["get_pods"]},
        {"name": "docs", "url": "https://docs.example/mcp", "toolsPrefix": "docs", "authEnv": "MCP_AUTH_DOCS"}]
    assert env["MCP_AUTH_K8S_TOOLS"] == {"secretKeyRef": {"name": "mcp-token", "key": "token", "optional": True}}
    assert env["MCP_AUTH_DOCS"] == {"secretKeyRef": {"name": "docs-key", "key": "bearer", "optional": True}}
    # The agent reads exactly this.
    read = servers_from_env(env)
    assert [(s.name, s.prefix, s.timeout, s.auth_env, s.allow) for s in read] == [
        ("k8s-tools", "k8s", 20.0, "MCP_AUTH_K8S_TOOLS", ("get_pods",)), ("docs", "docs", 30.0, "MCP_AUTH_DOCS", ())]


@pytest.mark.parametrize(("servers", "field"), [
    ([{"name": "a", "url": "http://a/mcp", "toolsPrefix": "t"}, {"name": "b", "url": "http://b/mcp",
                                                                   "toolsPrefix": "t"}], "spec.mcpServers[1].toolsPrefix"),
    ([{"name": "a-b", "url": "http://a/mcp", "toolsPrefix": "a"}, {"name": "a.b", "url": "http://b/mcp",
                                                                     "toolsPrefix": "b"}], "spec.mcpServers[1].name"),
    ([{"name": "a", "url": "ftp://a/mcp", "toolsPrefix": "a"}], "spec.mcpServers[0].url"),
])
def test_mcp_servers_that_would_collide_or_cannot_be_spoken_to_fail_the_run_naming_the_field(
        servers: list[dict[str, Any]], field: str) -> None:
    agent = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {"mcpServers": servers}})
    with pytest.raises(FieldProblem, match="^" + 'Agent "helper" ' + field.replace("[", r"\[").replace("]", r"\]")):
        resolved(agent)


def test_the_policys_tool_rules_reach_the_agent_and_are_decided_as_the_agent_decides() -> None:
    policy = normalize_policy({"metadata": {"name": "strict"}, "spec": {"template": "Restrictive"}})
    run = resolved(policy=policy, toolPolicy={"allow": ["read_file"]}, sandbox={"enabled": True})
    env = env_of(pod_of(run)["containers"][0])
    agent = ToolPolicy.from_env(env)
    assert agent == dataclasses.replace(policy.agent_tools(), run_allow=("read_file",)), "the same rules, as read"
    assert agent.decide("execute_command").action == "deny" and agent.decide("read_file").action == "allow"
    with pytest.raises(PolicyViolation, match=r'tool "write_file" is denied by policy "strict" \(template '
                                              r'Restrictive\), rule toolGating \(write_file: deny\)'):
        resolved(policy=policy, toolPolicy={"allow": ["write_file"]}, sandbox={"enabled": True})
    assert "AGENT_TOOL_POLICY" not in env_of(pod_of(resolved())["containers"][0]), "no policy, no rules"


@pytest.mark.parametrize("key", ["AGENT_TOOL_POLICY", "EXEC_TARGETS", "MCP_AUTH_DOCS", "WORKSPACE_DIR",
                                 "AGENT_SIDECAR_TOOLS", "AGENT_STATE_DIR", "MODEL_BASE_URL", "TASK_FILE",
                                 "SYSTEM_PROMPT_FILE"])
def test_env_may_not_replace_what_agentrun_sets_for_the_agent(key: str) -> None:
    with pytest.raises(PolicyViolation, match=rf"^spec\.env\.{key}: {key} is set for the agent by agentrun \("):
        resolved(env={key: "x"})
    assert resolved(env={"FETCH_URL_ALLOW": "docs.internal"}).env == {"FETCH_URL_ALLOW": "docs.internal"}, \
        "the fetch allow-list is the run's (or its Agent's) to set"
