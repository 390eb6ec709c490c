"""Secrets by reference, grants checked against their author, and gate hooks that cannot approve their own author's
run (issue 27, holes 1 to 4), against the whole stack.

The API's webhooks are registered for the test's namespace as `agentrun up` registers them (`protected`). People act
through the real `kubectl` as limited users, by impersonation (`--as`, which localkube honours with their RBAC), and
through the API with a bearer token. Each scenario is one the issue reproduced against the running stack.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from cli import webhooks
from cli.stack import free_port
from localkube.certs import ensure_tls
from tests.conftest import Kubectl
from tests.e2e.conftest import QUIET_CRON, Stack, agent, agent_run
from tests.e2e.test_gate import RBAC, annotate, gate_hook
from tests.e2e.test_gate_authority import (
    EVE,
    AuthorityApi,
    authority_api,
    policy,
    protected,
    refusal_events,
)
from tests.localkube.test_tokens_and_access_reviews import grant
from tests.waiting import wait_for

__all__ = ["authority_api", "protected"]  # fixtures: the API process and its webhooks registered for the namespace
G, V = "sympozium.ai", "v1alpha1"
RBAC_GROUP = "rbac.authorization.k8s.io"
# What a user needs to write these objects at all: so that any refusal below is agentrun's, not Kubernetes' own.
WRITER = [{"apiGroups": [G], "resources": ["agentruns", "agents", "skillpacks", "sympoziumschedules"],
           "verbs": ["get", "list", "create", "update", "patch"]}]
READ_CM = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]


def user(stack: Stack, ns: str, name: str, rules: list[dict[str, Any]]) -> str:
    """A Kubernetes user holding exactly `rules` in `ns` (a Role and RoleBinding named after it); its name."""
    grant(stack.api, ns, re.sub(r"[^a-z0-9-]", "-", name), rules, {"kind": "User", "name": name, "apiGroup": RBAC_GROUP})
    return name


def as_user(kubectl: Kubectl, who: str, verb: str, ns: str, body: dict[str, Any]) -> Any:
    body = {**body, "metadata": {**body["metadata"], "namespace": ns}}
    return kubectl(verb, "--as", who, "--as-group", "system:authenticated", "-f", "-", input=yaml.safe_dump(body))


def secret(stack: Stack, ns: str, name: str) -> None:
    stack.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": {"token": "s3cr3t"}})


def secret_env(name: str) -> dict[str, Any]:
    return {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}}


def test_a_user_who_cannot_read_a_secret_cannot_have_a_run_read_it(stack: Stack, protected: str,
                                                                   kubectl: Kubectl) -> None:
    """Hole 1 as reproduced: mallory may create runs, Agents and SkillPacks, but not read Secrets nor create pods. A
    hook's env, an Agent's hook, a SkillPack sidecar's env and model.authSecretRef with her own baseURL each got
    her the Secret's value; each is now refused at `kubectl create` naming the field and the Secret."""
    ns = protected
    secret(stack, ns, "db")
    stack.create(ns, "agents", agent())
    mallory = user(stack, ns, "mallory", WRITER)
    leak = agent_run("leak", lifecycle={"postRun": [{"name": "h", "image": "busybox:1.36", "env": [secret_env("db")],
                                                     "command": ["sh", "-c", "echo $TOKEN"]}]})
    out = as_user(kubectl, mallory, "create", ns, leak)
    assert out.returncode == 1, out.stdout
    assert ('denied the request: spec.lifecycle.postRun[0].env[0].valueFrom.secretKeyRef.name: "mallory" may not '
            f'get Secret "db" in namespace "{ns}"') in out.stderr, out.stderr
    assert stack.get_run(ns, "leak") is None
    own_agent = agent("mine", lifecycle={"postRun": [{"name": "h", "image": "busybox:1.36", "env": [secret_env("db")]}]})
    out = as_user(kubectl, mallory, "create", ns, own_agent)
    assert out.returncode == 1 and ('spec.agents.default.lifecycle.postRun[0].env[0].valueFrom.secretKeyRef.name: '
                                    '"mallory" may not get Secret "db"') in out.stderr, out.stderr
    pack = {"apiVersion": f"{G}/{V}", "kind": "SkillPack", "metadata": {"name": "tools"},
            "spec": {"skills": [{"name": "s", "content": "c"}], "sidecar": {"image": "t", "env": [secret_env("db")]}}}
    out = as_user(kubectl, mallory, "create", ns, pack)
    assert out.returncode == 1 and 'spec.sidecar.env[0].valueFrom.secretKeyRef.name: "mallory" may not get Secret ' \
                                   '"db"' in out.stderr, out.stderr
    redirected = agent_run("redirect", model={"authSecretRef": "db", "baseURL": "http://127.0.0.1:9/v1"})
    out = as_user(kubectl, mallory, "create", ns, redirected)
    assert out.returncode == 1 and 'spec.model.authSecretRef: "mallory" may not get Secret "db"' in out.stderr
    # The namespace's administrator (the stack's kubeconfig) may: the rule is the author's rights, not a ban.
    stack.create(ns, "agentruns", leak)
    assert stack.wait_phase(ns, "leak")["status"]["phase"] == "Succeeded"


def test_a_key_lent_by_an_agent_goes_only_where_the_agent_sends_it(stack: Stack, protected: str,
                                                                   kubectl: Kubectl) -> None:
    """Hole 1's last repro: a run using its Agent's key with its own baseURL got the key as a Bearer header at the
    creator's listener. A run may borrow the key; it may not move it."""
    ns = protected
    secret(stack, ns, "team-key")
    keyed = agent("keyed")
    keyed["spec"]["authRefs"] = [{"provider": "openai", "secret": "team-key"}]
    stack.create(ns, "agents", keyed)
    mallory = user(stack, ns, "mallory", WRITER)
    out = as_user(kubectl, mallory, "create", ns, agent_run("borrow", agent_ref="keyed"))
    assert out.returncode == 0, out.stderr
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("there", {"model": {"baseURL": "http://127.0.0.1:9/v1"}}, "spec.model.baseURL"),
        ("proxied", {"env": {"HTTPS_PROXY": "http://127.0.0.1:9"}}, "spec.env.HTTPS_PROXY")]
    for name, spec, field in cases:
        out = as_user(kubectl, mallory, "create", ns, agent_run(name, agent_ref="keyed", **spec))
        assert out.returncode == 1, out.stdout
        assert (f'denied the request: {field} (would send the provider key of Agent "keyed", Secret "team-key", '
                'elsewhere than the Agent does): "mallory" may not get Secret "team-key"') in out.stderr, out.stderr


def test_changing_an_agents_hook_under_unchanged_rules_is_a_new_grant(stack: Stack, protected: str,
                                                                     kubectl: Kubectl) -> None:
    """Hole 2: mallory may edit Agents but does not hold what their owner delegated; replacing a hook's command
    under the same rules handed her hooks those rules. Now refused; an edit granting nothing goes through."""
    ns = protected
    stack.create(ns, "agents", agent(lifecycle={"postRun": [{"name": "report", "image": "busybox:1.36",
                                                            "command": ["sh", "-c", "echo ok"]}], "rbac": READ_CM}))
    mallory = user(stack, ns, "mallory", WRITER)
    current: Any = stack.custom.get_namespaced_custom_object(G, V, ns, "agents", "helper")
    edited = json.loads(json.dumps(current))
    edited["spec"]["agents"]["default"]["lifecycle"]["postRun"][0]["command"] = ["sh", "-c", "kubectl get cm -A"]
    out = as_user(kubectl, mallory, "replace", ns, edited)
    assert out.returncode == 1, out.stdout
    assert ('denied the request: spec.agents.default.lifecycle.rbac[0]: "mallory" may not grant get configmaps'
            in out.stderr), out.stderr
    renamed = json.loads(json.dumps(current))
    renamed["spec"]["systemPrompt"] = "be brief"
    out = as_user(kubectl, mallory, "replace", ns, renamed)
    assert out.returncode == 0, out.stderr
    assert current["metadata"]["annotations"]["agentrun.dev/author"] == "admin"
    after: Any = stack.custom.get_namespaced_custom_object(G, V, ns, "agents", "helper")
    assert after["metadata"]["annotations"]["agentrun.dev/author"] == "admin", "an edit that grants nothing keeps it"


def test_a_skill_packs_sidecar_rules_are_checked_against_its_writer(stack: Stack, protected: str,
                                                                    kubectl: Kubectl) -> None:
    """Hole 3: a SkillPack's sidecar.rbac was checked against nobody (the definitions webhook only warned)."""
    ns = protected
    mallory = user(stack, ns, "mallory", WRITER)
    pack = {"apiVersion": f"{G}/{V}", "kind": "SkillPack", "metadata": {"name": "ops"},
            "spec": {"skills": [{"name": "s", "content": "c"}],
                     "sidecar": {"image": "t", "rbac": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
                                 "clusterRBAC": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}}}
    out = as_user(kubectl, mallory, "create", ns, pack)
    assert out.returncode == 1 and f'spec.sidecar.rbac[0]: "mallory" may not grant list pods in namespace "{ns}"' \
        in out.stderr, out.stderr
    with_pods = user(stack, ns, "podlister", [*WRITER, {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    out = as_user(kubectl, with_pods, "create", ns, pack)
    assert out.returncode == 1 and ('spec.sidecar.clusterRBAC[0]: "podlister" may not grant list nodes cluster-wide'
                                    in out.stderr), out.stderr


def test_the_api_and_a_schedule_create_runs_in_their_authors_name(
        stack: Stack, authority_api: AuthorityApi, protected: str, kubectl: Kubectl) -> None:
    """Hole 3: a run created through the API was checked as the API's account, a schedule's tick as the worker's.
    Now the API's run is its token's identity's (eve holds no rights here: the Agent's hook rules are refused), and
    a tick's run carries its schedule's author, against whom it is checked."""
    ns = protected
    stack.create(ns, "agents", agent(lifecycle={"postRun": [{"name": "r", "image": "busybox:1.36",
                                                            "command": ["true"]}], "rbac": READ_CM}))
    r = httpx.post(f"{authority_api.base}/api/v1/runs", params={"namespace": ns}, timeout=30,
                   headers={"Authorization": f"Bearer {EVE}"}, json={"agentRef": "helper", "task": "hello"})
    assert r.status_code == 403, r.text
    assert ('spec.lifecycle.rbac[0] (inherited from Agent "helper" spec.agents.default.lifecycle.rbac[0]): '
            '"eve@example.com" may not grant get configmaps') in r.json()["detail"], r.text
    user(stack, ns, "eve@example.com", READ_CM)
    r = httpx.post(f"{authority_api.base}/api/v1/runs", params={"namespace": ns}, timeout=30,
                   headers={"Authorization": f"Bearer {EVE}"}, json={"agentRef": "helper", "task": "hello"})
    assert r.status_code == 201, r.text
    notes = r.json()["metadata"]["annotations"]
    assert (notes["agentrun.dev/created-by"], notes["agentrun.dev/created-by-groups"]) == ("eve@example.com", "[]")

    schedule = {"apiVersion": f"{G}/{V}", "kind": "SympoziumSchedule", "metadata": {"name": "nightly"},
                "spec": {"agentRef": "helper", "schedule": QUIET_CRON, "task": "tick"}}
    mallory = user(stack, ns, "mallory", WRITER)
    out = as_user(kubectl, mallory, "create", ns, schedule)
    assert out.returncode == 1 and ('spec.agentRef (its runs inherit Agent "helper" '
                                    'spec.agents.default.lifecycle.rbac[0]): "mallory" may not grant get configmaps'
                                    in out.stderr), out.stderr
    planner = user(stack, ns, "planner", [*WRITER, *READ_CM])
    out = as_user(kubectl, planner, "create", ns, schedule)
    assert out.returncode == 0, out.stderr
    def mirrored() -> bool:
        obj: Any = stack.custom.get_namespaced_custom_object(G, V, ns, "sympoziumschedules", "nightly")
        return bool((obj.get("status") or {}).get("phase") == "Active")
    wait_for(mirrored, timeout=60, what="the schedule mirrored into Temporal")
    r = httpx.post(f"{authority_api.base}/api/v1/schedules/nightly/trigger", params={"namespace": ns}, timeout=30,
                   headers={"Authorization": f"Bearer {EVE}"})
    assert r.status_code in (200, 202), r.text

    def tick_run() -> dict[str, Any] | None:
        runs: Any = stack.custom.list_namespaced_custom_object(G, V, ns, "agentruns",
                                                               label_selector="sympozium.ai/schedule=nightly")
        return runs["items"][0] if runs["items"] else None
    made = wait_for(tick_run, timeout=60, what="the tick's run")
    notes = made["metadata"]["annotations"]
    assert notes["agentrun.dev/created-by"] == "planner", notes
    assert json.loads(notes["agentrun.dev/created-by-groups"]) == ["system:authenticated"]
    assert stack.wait_phase(ns, made["metadata"]["name"], timeout=90)["status"]["phase"] == "Succeeded"


def test_an_ensembles_agents_carry_its_author(stack: Stack, protected: str, kubectl: Kubectl) -> None:
    """Hole 3: a pack's stamped Agent was checked as the bridge. It now carries the pack's author, and a pack whose
    writer does not hold its personas' lifecycle rules is refused before anything is stamped."""
    ns = protected
    persona = {"name": "lead", "systemPrompt": "lead", "lifecycle": {"rbac": READ_CM}}
    team = {"apiVersion": f"{G}/{V}", "kind": "Ensemble", "metadata": {"name": "team"},
            "spec": {"enabled": True, "agentConfigs": [persona]}}
    mallory = user(stack, ns, "mallory", [{"apiGroups": [G], "resources": ["ensembles"], "verbs": ["create"]}])
    out = as_user(kubectl, mallory, "create", ns, team)
    assert out.returncode == 1 and ('spec.agentConfigs[0].lifecycle.rbac[0]: "mallory" may not grant get configmaps'
                                    in out.stderr), out.stderr
    lead = user(stack, ns, "lead-writer", [{"apiGroups": [G], "resources": ["ensembles"], "verbs": ["create"]},
                                           *READ_CM])
    out = as_user(kubectl, lead, "create", ns, team)
    assert out.returncode == 0, out.stderr

    def stamped() -> dict[str, Any] | None:
        try:
            obj: Any = stack.custom.get_namespaced_custom_object(G, V, ns, "agents", "team-lead")
        except client.ApiException:
            return None
        return dict(obj)
    made = wait_for(stamped, timeout=60, what="the Ensemble's Agent stamped out")
    assert made["metadata"]["annotations"]["agentrun.dev/author"] == "lead-writer"


def test_under_approvers_a_creators_own_gate_hook_cannot_approve_their_run(
        stack: Stack, protected: str, kubectl: Kubectl) -> None:
    """Hole 4 as reproduced: with approvers and requireDistinctApprover, the run's creator added a gate hook (with
    agentruns get,patch, which they hold) that annotated approve, and the gate ended approved by the hook's account.
    Now that verdict is refused at admission and recorded; a gate hook from an Agent someone else wrote decides."""
    ns = protected
    approve = annotate({"action": "approve", "reason": "self-approved"})
    stack.create(ns, "sympoziumpolicies", policy("review", approvers=["alice@example.com"],
                                                 requireDistinctApprover=True))
    for name, lifecycle in (("helper", None), ("gated", {"postRun": [gate_hook(approve)], "rbac": RBAC,
                                                         "gateTimeout": "5m"})):
        body = agent(name, lifecycle=lifecycle) if lifecycle else agent(name)
        body["spec"]["policyRef"] = "review"
        stack.create(ns, "agents", body)
    creator = user(stack, ns, "creator", [{"apiGroups": [G], "resources": ["agentruns"],
                                           "verbs": ["get", "create", "patch"]}])
    own = agent_run("own", lifecycle={"postRun": [gate_hook(approve)], "rbac": RBAC, "gateTimeout": "5m"})
    out = as_user(kubectl, creator, "create", ns, own)
    assert out.returncode == 0, out.stderr
    st = stack.wait_phase(ns, "own", timeout=90)["status"]
    assert st["gateVerdict"] != "approved" and st["gate"].get("decidedBy") != \
        f"system:serviceaccount:{ns}:sympozium-lifecycle-own", st
    assert st["lifecycleAuthor"] == "creator"
    [event] = refusal_events(stack, ns, "own")
    assert event.startswith(f"verdict from system:serviceaccount:{ns}:sympozium-lifecycle-own refused (admission): "
                            "the run's gate hook"), event
    assert 'its hooks were written by "creator", who created the run' in event

    out = as_user(kubectl, creator, "create", ns, agent_run("inherited", agent_ref="gated"))
    assert out.returncode == 0, out.stderr
    st = stack.wait_phase(ns, "inherited", timeout=90)["status"]
    assert (st["gateVerdict"], st["gate"]["decidedBy"]) == (
        "approved", f"system:serviceaccount:{ns}:sympozium-lifecycle-inherited"), st
    assert st["lifecycleAuthor"] == "admin"
    assert refusal_events(stack, ns, "inherited") == []


def test_while_the_webhook_cannot_be_reached_nothing_is_admitted_unchecked(stack: Stack, namespace: str,
                                                                            kubectl: Kubectl, tmp_path: Path) -> None:
    """The checks above exist only at admission (who wrote a run, what they may read), so the webhooks fail closed by
    default: registered as `agentrun up` and the chart register them, but with the API unreachable (a closed port),
    a run that names a Secret, an Agent and a schedule are all refused, and nothing is stored. Under Ignore (the
    earlier default) the run was stored and its hook could read the Secret."""
    ca_pem = ensure_tls(tmp_path / "tls").ca_pem
    configs = webhooks.configurations(f"https://127.0.0.1:{free_port()}", ca_pem,
                                      namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}})
    webhooks.register(stack.api, configs)
    try:
        secret(stack, namespace, "db")
        mallory = user(stack, namespace, "mallory", WRITER)
        leak = agent_run("leak", lifecycle={"postRun": [{"name": "h", "image": "busybox:1.36",
                                                         "env": [secret_env("db")]}]})
        for body in (leak, agent("mine"), {"apiVersion": f"{G}/{V}", "kind": "SympoziumSchedule",
                                           "metadata": {"name": "nightly"},
                                           "spec": {"agentRef": "mine", "schedule": QUIET_CRON, "task": "t"}}):
            out = as_user(kubectl, mallory, "create", namespace, body)
            assert out.returncode == 1, out.stdout
            assert "failed calling webhook" in out.stderr, out.stderr
        assert stack.get_run(namespace, "leak") is None
    finally:
        webhooks.unregister(stack.api, configs)
