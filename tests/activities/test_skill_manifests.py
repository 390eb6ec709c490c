"""The agent pod with SkillPacks: /skills, SYMPOZIUM_SKILL_TARGETS, sidecars with their own token, per-run RBAC."""

from __future__ import annotations

from typing import Any

from activities import skill_manifests as skm
from activities.manifests import agent_job, skill_rbac
from agentrunner.executor import wrap
from models.agent import normalize_agent
from models.resolve import ResolvedRun, resolve_run
from models.skills import resolve_skills

AGENT = normalize_agent({"metadata": {"name": "helper", "namespace": "ns"}, "spec": {}})
TOOLS: dict[str, Any] = {"metadata": {"name": "tools"}, "spec": {"skills": [{"name": "a", "content": "x"}], "sidecar": {
    "image": "tools:1", "imagePullPolicy": "Never", "command": ["serve"], "mountWorkspace": False,
    "resources": {"cpu": "50m"},
    "env": [{"name": "A", "value": "1"}, {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    "rbac": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}}}
PLAIN = {"metadata": {"name": "plain"}, "spec": {"skills": [{"name": "b", "content": "y"}]}}


def resolved(skills: list[Any], **spec: Any) -> ResolvedRun:
    obj = {"metadata": {"name": "run1", "namespace": "ns", "uid": "uid-1"},
           "spec": {"agentRef": "helper", "task": "do", "skills": skills, **spec}}
    run = resolve_run(obj, AGENT, default_image="agent:1")
    run.skill_packs = resolve_skills(run.skills, {"tools": TOOLS, "plain": PLAIN}, field="spec.skills")
    return run


def pod_of(run: ResolvedRun) -> dict[str, Any]:
    spec: dict[str, Any] = agent_job(run, workflow_id="wf")["spec"]["template"]["spec"]
    return spec


def test_a_run_without_skills_has_no_skills_volume_sidecar_or_targets() -> None:
    pod = pod_of(resolved([]))
    assert [c["name"] for c in pod["initContainers"]] == ["tools"], "only where its commands run"
    assert [v["name"] for v in pod["volumes"]] == ["workspace", "ipc", "tmp", "exec", "exec-tmp"]
    assert not any(e["name"] in ("SYMPOZIUM_SKILL_TARGETS", "AGENT_SIDECAR_TOOLS", "AGENT_SKILL_PARAMS")
                   for e in pod["containers"][0]["env"])


def test_skills_are_projected_read_only_at_skills_and_targets_name_the_sidecar_packs() -> None:
    pod = pod_of(resolved(["plain", "tools", {"configMapRef": "own-cm"}]))
    agent = pod["containers"][0]
    skills = next(v for v in pod["volumes"] if v["name"] == "skills")
    assert skills == {"name": "skills", "projected": {"sources": [
        {"configMap": {"name": n, "optional": True}} for n in ("plain", "tools", "own-cm")]}}
    assert {"name": "skills", "mountPath": "/skills", "readOnly": True} in agent["volumeMounts"]
    assert {"name": "SYMPOZIUM_SKILL_TARGETS", "value": "tools"} in agent["env"]
    # The agent keeps the permission-less account with no token, and mounts no sidecar token.
    assert pod["serviceAccountName"] == "sympozium-agent" and pod["automountServiceAccountToken"] is False
    assert not any(m["name"].startswith("skill-token") for m in agent["volumeMounts"])


def test_the_sidecar_is_a_native_sidecar_with_its_own_token_only_in_it() -> None:
    pod = pod_of(resolved(["tools"]))
    [_tools, sc] = pod["initContainers"]
    assert sc == {
        "name": "skill-tools", "image": "tools:1", "restartPolicy": "Always", "command": wrap("tools", ["serve"]),
        "imagePullPolicy": "Never",
        "env": [{"name": "A", "value": "1"}, {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "SKILL_PACK", "value": "tools"}],
        # mountWorkspace: false: no /workspace, no /ipc; a /tmp that is not the agent's, its own token, and its own
        # directory of the executor's volume
        "volumeMounts": [{"name": "exec-tmp", "mountPath": "/tmp"},
                         {"name": "skill-token-0", "mountPath": skm.SA_PATH, "readOnly": True},
                         {"name": "exec", "mountPath": "/agentrun/exec/tools", "subPath": "tools"}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "50m", "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    token = next(v for v in pod["volumes"] if v["name"] == "skill-token-0")
    assert token["projected"]["sources"][0] == {"secret": {"name": "sympozium-skill-tools-run1",
                                                           "items": [{"key": "token", "path": "token"}]}}


def test_with_hooks_the_sidecar_shares_the_workspace_pvc_unless_told_not_to() -> None:
    tools = {**TOOLS, "spec": {**TOOLS["spec"], "sidecar": {"image": "t:1"}}}
    run = resolve_run({"metadata": {"name": "run1", "namespace": "ns", "uid": "uid-1"},
                       "spec": {"agentRef": "helper", "task": "do", "skills": ["tools"], "lifecycle": {
                           "preRun": [{"name": "p", "image": "busybox"}]}}}, AGENT, default_image="agent:1")
    run.skill_packs = resolve_skills(run.skills, {"tools": tools}, field="spec.skills")
    [_tools, sc] = pod_of(run)["initContainers"]
    assert [m["mountPath"] for m in sc["volumeMounts"]] == ["/workspace", "/ipc", "/tmp", skm.SA_PATH,
                                                            "/agentrun/exec/tools"]
    assert sc["command"] == wrap("tools", []), "no command: the executor alone (the image's entrypoint is unknown)"


def test_per_run_rbac_is_exactly_the_packs_rules_bound_to_its_own_account() -> None:
    run = resolved(["tools", "plain"])
    [[sa, secret, role, binding]] = skill_rbac(run)
    name = "sympozium-skill-tools-run1"
    for obj in (sa, secret, role, binding):
        assert obj["metadata"]["name"] == name
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert obj["metadata"]["labels"]["sympozium.ai/agent-run"] == "run1"
    assert sa["kind"] == "ServiceAccount" and sa["automountServiceAccountToken"] is False
    assert secret["kind"] == "Secret" and secret["type"] == "Opaque" and "data" not in secret
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "ns"}]
    req = skm.token_request(run)
    assert "boundObjectRef" not in req["spec"]  # it dies with its account (deleted at cleanup)
    assert req["spec"]["expirationSeconds"] == run.timeout_seconds + skm.TOKEN_SLACK_SECONDS
