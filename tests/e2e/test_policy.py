"""SympoziumPolicy enforcement at workflow start, with no admission webhook registered (SPEC §1.5).

A cluster without the webhook is still protected: every run that breaks a policy rule ends
`Failed` when its workflow starts, with an error naming the field and the rule, and nothing of it
(Job, pod, PVC, lifecycle RBAC) ever exists. The API also serves the webhook over TLS, as the
kube-apiserver requires, and once registered with localkube it refuses a violating `kubectl apply`.
"""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from cli.stack import free_port, stop_process
from localkube.certs import ensure_tls
from tests.conftest import Kubectl
from tests.e2e.conftest import Record, Stack, agent, agent_run, condition, ensure_runtime_class
from tests.waiting import wait_for

STRICT = {
    "toolGating": {"defaultAction": "allow", "rules": [{"tool": "shell", "action": "deny"}]},
    "sandboxPolicy": {"required": True, "agentSandboxPolicy": {"required": True,
                                                               "allowedRuntimeClasses": ["gvisor"]}},
    "subagentPolicy": {"maxDepth": 2},
    "imagePolicy": {"allowedRegistries": ["ghcr.io/org/"]},
    "lifecyclePolicy": {"deniedResources": ["secrets"]},
    "deniedEnv": ["DEBUG"],
}
# Complies with STRICT; each violating run below breaks exactly one rule of it.
OK: dict[str, Any] = {"sandbox": {"enabled": True}, "agentSandbox": {"enabled": True, "runtimeClass": "gvisor"},
                      "toolPolicy": {"allow": ["read_file"]}, "parent": {"runName": "up", "spawnDepth": 2}}
# Would create a workspace PVC, a preRun Job and lifecycle RBAC if the run were let through.
HOOKED = {"preRun": [{"name": "pre", "image": "ghcr.io/org/pre:1", "command": ["sh", "-c", "true"]}],
          "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumPolicy", "metadata": {"name": name},
            "spec": spec}


def _parent_and_runtime_class(stack: Stack, ns: str) -> None:
    """What OK refers to exists: the RuntimeClass gvisor and the parent run "up" (of an Agent without a policy).

    Every run of the test names "up" as its parent, so its Agent takes that many children: with the default
    maxChildrenPerAgent (3) the compliant run was refused whenever the runs' creation spanned a second boundary
    (siblings are ordered by creationTimestamp, then name), as it did once on a loaded CI machine."""
    ensure_runtime_class(stack.api, "gvisor")
    if stack.get_run(ns, "up") is None:
        stack.create(ns, "agents", agent("free", subagents={"maxChildrenPerAgent": 50, "maxConcurrent": 50}))
        stack.create(ns, "agentruns", agent_run("up", agent_ref="free"))


def _with(lifecycle: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {**OK, "lifecycle": {**HOOKED, **(lifecycle or {})}, **spec}


# run name → (agent, spec, field, rule text the error must contain)
VIOLATING: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "tool": ("guarded", _with(toolPolicy={"allow": ["shell"]}), "spec.toolPolicy.allow[0]", "toolGating"),
    "sandbox": ("guarded", _with(sandbox={"enabled": False}), "spec.sandbox.enabled", "sandboxPolicy.required"),
    "agentsandbox": ("guarded", _with(agentSandbox={"enabled": False}), "spec.agentSandbox.enabled",
                     "agentSandboxPolicy.required"),
    "runtimeclass": ("guarded", _with(agentSandbox={"enabled": True, "runtimeClass": "runc"}),
                     "spec.agentSandbox.runtimeClass", "allowedRuntimeClasses"),
    "preimage": ("guarded", _with({"preRun": [{"name": "pre", "image": "busybox:1.36"}]}),
                 "spec.lifecycle.preRun[0].image", "imagePolicy.allowedRegistries"),
    "postimage": ("guarded", _with({"postRun": [{"name": "post", "image": "quay.io/x/post:1"}]}),
                  "spec.lifecycle.postRun[0].image", "imagePolicy.allowedRegistries"),
    "rbac": ("guarded", _with({"rbac": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
             "spec.lifecycle.rbac[0].resources", "lifecyclePolicy.deniedResources"),
    "listedenv": ("guarded", _with(env={"DEBUG": "1"}), "spec.env.DEBUG", "deniedEnv"),
    "alwaysenv": ("guarded", _with(env={"PATH": "/evil"}), "spec.env.PATH", "always denied"),
    "depth": ("guarded", _with(parent={"runName": "up", "spawnDepth": 3}), "spec.parent.spawnDepth",
              "subagentPolicy.maxDepth"),
    "nopolicyenv": ("free", {"env": {"HOSTNAME": "x"}, "lifecycle": HOOKED}, "spec.env.HOSTNAME", "always denied"),
    "template": ("templated", _with(toolPolicy={"allow": ["git"]}), "spec.toolPolicy.allow[0]",
                 'policy "docs" (template Restrictive)'),
    "legacy": ("legacy", _with(toolPolicy={"allow": ["shell"]}), "spec.toolPolicy.allow[0]", 'policy "strict"'),
}


def test_each_policy_rule_fails_its_run_at_workflow_start_and_nothing_is_ever_created(
        stack: Stack, namespace: str, record: Record) -> None:
    ns = namespace
    watched = {kind: record(ns, kind) for kind in ("jobs", "pods", "persistentvolumeclaims", "roles",
                                                   "rolebindings", "serviceaccounts")}
    stack.create(ns, "sympoziumpolicies", _policy("strict", STRICT))
    stack.create(ns, "sympoziumpolicies", _policy("docs", {"template": "Restrictive"}))
    stack.create(ns, "agents", {**agent("guarded"), "spec": {**agent("guarded")["spec"], "policyRef": "strict"}})
    stack.create(ns, "agents", {**agent("templated"), "spec": {**agent("templated")["spec"], "policyRef": "docs"}})
    _parent_and_runtime_class(stack, ns)
    stack.create(ns, "sympoziuminstances", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SympoziumInstance", "metadata": {"name": "legacy"},
        "spec": {"provider": {"name": "echo", "model": "echo-1"}, "policy": "strict"}})
    for name, (agent_name, spec, _field, _rule) in VIOLATING.items():
        stack.create(ns, "agentruns", agent_run(name, agent_ref=agent_name, **spec))
    # The same policy lets a compliant run through, so the refusals above are the rules, not the setup.
    stack.create(ns, "agentruns", agent_run("compliant", agent_ref="guarded", **OK))

    for name, (_agent, _spec, field, rule) in VIOLATING.items():
        run = stack.wait_phase(ns, name)
        status = run["status"]
        assert status["phase"] == "Failed", (name, status)
        assert status["error"].startswith(field + ":") and rule in status["error"], (name, status["error"])
        cond = condition(run, "Validated")
        assert cond is not None and cond["status"] == "False" and cond["message"] == status["error"], (name, cond)
        assert "jobName" not in status
    compliant = stack.wait_phase(ns, "compliant")["status"]
    assert compliant["phase"] == "Succeeded", compliant

    def objects_of(run: str) -> set[str]:
        names = {f"{run}-workspace", f"sympozium-lifecycle-{run}"}
        found = set()
        for kind, rec in watched.items():
            for _t, obj in rec.snapshot():
                labels = obj["metadata"].get("labels") or {}
                if obj["metadata"]["name"] in names or labels.get("sympozium.ai/agent-run") == run:
                    found.add(f"{kind}/{obj['metadata']['name']}")
        return found

    # The recorders do see what a run creates: the compliant run's Job and pod...
    watched["jobs"].seen(lambda _t, o: (o["metadata"].get("labels") or {}).get("sympozium.ai/agent-run")
                         == "compliant")
    assert objects_of("compliant")
    # ...and not one object of any refused run ever existed.
    for name in VIOLATING:
        assert objects_of(name) == set(), (name, objects_of(name))


@dataclass
class TlsApi:
    base: str
    trust: ssl.SSLContext
    ca_pem: str


@pytest.fixture(scope="module")
def tls_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsApi]:
    """`python -m api --tls-cert ... --tls-key ...` with a certificate for 127.0.0.1 from a private CA."""
    d = tmp_path_factory.mktemp("api-tls")
    tls = ensure_tls(d / "tls")
    tokens = d / "tokens"
    tokens.write_text("t-tls-0123456789 ops@example.com\n")
    port = free_port()
    env = {**stack.worker.env, "AGENTRUN_TOKEN_FILE": str(tokens), "AGENTRUN_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "api", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)],
                            env=env, stdout=(d / "api.log").open("ab"), stderr=subprocess.STDOUT)
    base = f"https://127.0.0.1:{port}"
    trust = ssl.create_default_context(cafile=str(tls.ca_cert))

    def up() -> bool:
        try:
            return httpx.get(base + "/healthz", verify=trust, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=30, what="the API to serve HTTPS")
        yield TlsApi(base, trust, tls.ca_pem)
    finally:
        stop_process(proc)


def test_the_api_serves_the_admission_webhook_over_tls(tls_api: TlsApi, stack: Stack, namespace: str) -> None:
    base, trust = tls_api.base, tls_api.trust
    stack.create(namespace, "sympoziumpolicies", _policy("strict", STRICT))
    stack.create(namespace, "agents", {**agent("guarded"), "spec": {**agent("guarded")["spec"], "policyRef": "strict"}})
    uid = str(uuid.uuid4())
    obj = {**agent_run("r", agent_ref="guarded", **{**OK, "toolPolicy": {"allow": ["shell"]}})}
    obj["metadata"] = {"name": "r", "namespace": namespace}
    gvr = {"group": "sympozium.ai", "version": "v1alpha1", "resource": "agentruns"}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "sympozium.ai", "version": "v1alpha1", "kind": "AgentRun"}, "resource": gvr,
        "name": "r", "namespace": namespace, "operation": "CREATE", "object": obj}}
    r = httpx.post(base + "/admission/agentruns", json=body, verify=trust, timeout=10)
    assert r.status_code == 200, r.text
    resp = r.json()["response"]
    assert resp["uid"] == uid and resp["allowed"] is False
    assert resp["status"]["message"].startswith("spec.toolPolicy.allow[0]:") and "toolGating" in resp["status"]["message"]
    # Only HTTPS is served, and only to clients that trust the CA (as the apiserver does via caBundle).
    with pytest.raises(httpx.HTTPError):
        httpx.post(base.replace("https", "http") + "/admission/agentruns", json=body, timeout=5)
    with pytest.raises(httpx.ConnectError):
        httpx.post(base + "/admission/agentruns", json=body, timeout=5)  # system roots: not trusted


def test_a_registered_webhook_refuses_kubectl_apply_of_a_violating_run(tls_api: TlsApi, stack: Stack, namespace: str,
                                                                      kubectl: Kubectl) -> None:
    ns = namespace
    stack.create(ns, "sympoziumpolicies", _policy("strict", {**STRICT, "toolGating": {
        "defaultAction": "allow", "rules": [{"tool": "shell", "action": "deny"}, {"tool": "deploy", "action": "ask"}]}}))
    stack.create(ns, "agents", {**agent("guarded"), "spec": {**agent("guarded")["spec"], "policyRef": "strict"}})
    _parent_and_runtime_class(stack, ns)
    # deploy/webhook.yaml, pointed at the test's API by URL, and only at this test's namespace (the
    # localkube is shared by the whole session).
    config = next(d for d in yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy" / "webhook.yaml")
                                                .read_text()) if d["kind"] == "ValidatingWebhookConfiguration")
    config["metadata"]["name"] = f"agentrun-policy-{ns}"
    hook = config["webhooks"][0]
    hook["clientConfig"] = {"url": tls_api.base + "/admission/agentruns",
                            "caBundle": base64.b64encode(tls_api.ca_pem.encode()).decode()}
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    hook["failurePolicy"] = "Fail"  # a refusal below is the webhook's answer, never a call that failed
    admission = client.AdmissionregistrationV1Api(stack.api)
    admission.create_validating_webhook_configuration(config)
    try:
        def manifest(name: str, **spec: Any) -> str:
            body = agent_run(name, agent_ref="guarded", **{**OK, **spec})
            body["metadata"]["namespace"] = ns
            return yaml.safe_dump(body)

        out = kubectl("apply", "-f", "-", input=manifest("violating", toolPolicy={"allow": ["shell"]}))
        assert out.returncode != 0
        assert 'denied the request: spec.toolPolicy.allow[0]: tool "shell" is denied by policy "strict"' in out.stderr
        with pytest.raises(ApiException) as e:
            stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "violating")
        assert e.value.status == 404, "a refused run is never stored"

        out = kubectl("apply", "-f", "-", input=manifest("compliant", toolPolicy={"allow": ["read_file", "deploy"]}))
        assert out.returncode == 0, out.stderr
        assert 'Warning: tool "deploy" needs approval under policy "strict"' in out.stderr
        # It runs to the end through the webhook: the worker's finalizer add and removal are updates too.
        assert stack.wait_phase(ns, "compliant")["status"]["phase"] == "Succeeded"
        stack.custom.delete_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "compliant")
        wait_for(lambda: stack.get_run(ns, "compliant") is None, what="the compliant run to be deleted")
    finally:
        admission.delete_validating_webhook_configuration(config["metadata"]["name"])


def test_a_builtin_policy_name_works_without_an_object_and_an_unknown_one_says_how_to_create_it(
        stack: Stack, namespace: str) -> None:
    """The first-agent walkthrough's `policy: permissive` (no SympoziumPolicy object in the namespace) runs; a
    run under the built-in restrictive policy is refused by its rules; an unknown name fails the run saying how to
    create the policy."""
    ns = namespace
    for name, policy in (("walkthrough", {"policy": "permissive"}), ("locked", {"policyRef": "restrictive"}),
                         ("isolated", {"policyRef": "network-isolated"})):
        body = agent(name)
        body["spec"].update(policy)
        stack.create(ns, "agents", body)
        stack.create(ns, "agentruns", agent_run(f"{name}-run", agent_ref=name))
    assert stack.wait_phase(ns, "walkthrough-run")["status"]["phase"] == "Succeeded"
    locked = stack.wait_phase(ns, "locked-run")["status"]
    assert locked["phase"] == "Failed" and locked["error"].startswith("spec.sandbox.enabled:")
    assert 'policy "restrictive" (template Restrictive)' in locked["error"]
    isolated = stack.wait_phase(ns, "isolated-run")["status"]
    assert isolated["phase"] == "Failed"
    assert isolated["error"].startswith(f'agent policyRef: SympoziumPolicy "network-isolated" not found in namespace '
                                        f'"{ns}": create it')


@contextmanager
def _webhook_registered(tls_api: TlsApi, stack: Stack, ns: str) -> Iterator[None]:
    """deploy/webhook.yaml's AgentRun and Agent webhooks, pointed at the test's API by URL, for `ns` only."""
    docs = yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy" / "webhook.yaml").read_text())
    configs = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    admission = client.AdmissionregistrationV1Api(stack.api)
    for config in configs:
        config["metadata"]["name"] = f"{config['metadata']['name']}-{ns}"
        for hook in config["webhooks"]:
            hook["clientConfig"] = {"url": tls_api.base + hook["clientConfig"]["service"]["path"],
                                    "caBundle": base64.b64encode(tls_api.ca_pem.encode()).decode()}
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
            hook["failurePolicy"] = "Fail"
        admission.create_validating_webhook_configuration(config)
    try:
        yield
    finally:
        for config in configs:
            admission.delete_validating_webhook_configuration(config["metadata"]["name"])


def test_sympozium_fields_with_no_effect_warn_at_kubectl_apply_and_mark_the_run(
        tls_api: TlsApi, stack: Stack, namespace: str, kubectl: Kubectl) -> None:
    ns = namespace
    chatty = agent("chatty")
    chatty["spec"]["channels"] = [{"type": "slack", "configRef": {"secret": "slack"}}]
    chatty["metadata"]["namespace"] = ns
    with _webhook_registered(tls_api, stack, ns):
        out = kubectl("apply", "--validate=strict", "-f", "-", input=yaml.safe_dump(chatty))
        assert out.returncode == 0, out.stderr
        assert "Warning: spec.channels: has no effect here (channels" in out.stderr, out.stderr

        body = agent_run("dry", agent_ref="chatty", dryRun=True)
        body["metadata"]["namespace"] = ns
        out = kubectl("apply", "--validate=strict", "-f", "-", input=yaml.safe_dump(body))
        assert out.returncode == 0, out.stderr
        assert "Warning: spec.dryRun: has no effect here" in out.stderr, out.stderr
        assert 'Warning: Agent "chatty" spec.channels: has no effect here' in out.stderr, out.stderr
        run = stack.wait_phase(ns, "dry")
        assert run["status"]["phase"] == "Succeeded", run["status"]  # it ran, as a run without them would
        cond = condition(run, "FieldsIgnored")
        assert cond is not None and (cond["status"], cond["reason"]) == ("True", "NoEffectHere"), run["status"]
        assert cond["message"].startswith("spec.dryRun: has no effect here") and 'Agent "chatty" spec.channels' \
            in cond["message"]

        # Packs and Models are admitted with warnings too (the bridge writes the same into their status).
        fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium"
        for fixture, said in (("skillpack.yaml", "Warning: spec.sidecar.hostAccess: has no effect here"),
                              ("model.yaml", "Warning: Model: agentrun does not download or serve models")):
            doc = yaml.safe_load((fixtures / fixture).read_text())
            doc["metadata"]["namespace"] = ns
            out = kubectl("apply", "--validate=strict", "-f", "-", input=yaml.safe_dump(doc))
            assert out.returncode == 0, out.stderr
            assert said in out.stderr, out.stderr

        for name, spec, field in (("served", {"mode": "server"}, "spec.mode"),
                                  ("warm", {"agentSandbox": {"enabled": True, "warmPoolRef": "pool"}},
                                   "spec.agentSandbox.warmPoolRef")):
            body = agent_run(name, agent_ref="chatty", **spec)
            body["metadata"]["namespace"] = ns
            out = kubectl("apply", "--validate=strict", "-f", "-", input=yaml.safe_dump(body))
            assert out.returncode != 0
            assert f"denied the request: {field}: " in out.stderr and "not offered here" in out.stderr, out.stderr
            assert stack.get_run(ns, name) is None, "a refused run is never stored"
