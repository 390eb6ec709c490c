"""The AgentRun admission webhook (`POST /admission/agentruns`, SPEC §1.5) against the real localkube.

The API app runs in-process (httpx over ASGI; the admission route needs no Temporal), its
Kubernetes client talks to localkube over HTTPS, and the Agents and SympoziumPolicies it reads
are real objects there. Each policy rule refuses a violating run with a message naming the field
and the rule; a compliant run is admitted; malformed reviews get a 400 with a JSON detail.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client, config

from api.admission import READ_TIMEOUT_SECONDS
from api.main import State, create_app
from api.settings import ApiSettings
from cli.roles import bind, ensure_roles, user
from cli.up import install_crds
from localkube.testing import Handle
from models.policy import ALWAYS_DENIED_ENV
from models.roles import VIEWER

G, V = "sympozium.ai", "v1alpha1"
DEFAULT_EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "policies" / "default.yaml").read_text()
TOKEN = "t-admission-0123456789"

STRICT = {  # the current shape, one of every rule
    "toolGating": {"defaultAction": "allow", "rules": [{"tool": "shell", "action": "deny"},
                                                       {"tool": "deploy", "action": "ask"}]},
    "sandboxPolicy": {"required": True,
                      "agentSandboxPolicy": {"required": True, "allowedRuntimeClasses": ["gvisor"]}},
    "subagentPolicy": {"maxDepth": 2, "maxConcurrent": 5},
    "imagePolicy": {"allowedRegistries": ["ghcr.io/org/"]},
    "lifecyclePolicy": {"deniedResources": ["secrets", "clusterroles"]},
    "deniedEnv": ["DEBUG"],
}
DOCS = {"template": "Restrictive", "requireApproval": ["deploy"]}  # the docs shape
COMPLIANT: dict[str, Any] = {
    "task": "summarise", "sandbox": {"enabled": True},
    "agentSandbox": {"enabled": True, "runtimeClass": "gvisor"},
    "toolPolicy": {"allow": ["read_file"]}, "parent": {"runName": "up", "spawnDepth": 2},
    "env": {"MODE": "fast"},
    "lifecycle": {"preRun": [{"name": "pre", "image": "ghcr.io/org/pre:1"}],
                  "postRun": [{"name": "post", "image": "ghcr.io/org/post:1"}],
                  "rbac": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
}
# Restrictive allows these registries; the rest of COMPLIANT already complies with it.
DOCS_COMPLIANT = copy.deepcopy(COMPLIANT)
DOCS_COMPLIANT["lifecycle"]["preRun"][0]["image"] = "docker.io/library/busybox:1.36"
DOCS_COMPLIANT["lifecycle"]["postRun"][0]["image"] = "ghcr.io/sympozium-ai/post:1"


def _obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def ns(localkube: Handle) -> Iterator[str]:
    """One namespace with the policies and Agents every test here reads (created once: fast)."""
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    name = f"adm-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace",  # type: ignore[arg-type]
                           "metadata": {"name": name}})
    for plural, body in [
        ("sympoziumpolicies", _obj("SympoziumPolicy", "strict", STRICT)),
        ("sympoziumpolicies", _obj("SympoziumPolicy", "docs", DOCS)),
        ("sympoziumpolicies", _obj("SympoziumPolicy", "asking", {"template": "Default"})),
        ("agents", _obj("Agent", "guarded", {"agents": {"default": {"model": "m"}}, "policyRef": "strict"})),
        ("agents", _obj("Agent", "templated", {"agents": {"default": {"model": "m"}}, "policyRef": "docs"})),
        ("agents", _obj("Agent", "asker", {"agents": {"default": {"model": "m"}}, "policyRef": "asking"})),
        ("agents", _obj("Agent", "free", {"agents": {"default": {"model": "m"}}})),
        ("agents", _obj("Agent", "dangling", {"agents": {"default": {"model": "m"}}, "policyRef": "gone"})),
        # the legacy kind and shape: provider block, policy named under spec.policy
        ("sympoziuminstances", _obj("SympoziumInstance", "legacy", {
            "provider": {"name": "openai", "model": "gpt-4o", "apiKeySecret": "key"}, "policy": "strict"})),
        # COMPLIANT's parent run (a sub-agent's parent must exist, or the run would fail at start)
        ("agentruns", _obj("AgentRun", "up", {"agentRef": "free", "task": "plan"})),
    ]:
        custom.create_namespaced_custom_object(G, V, name, plural, body)
    # The reviews' user holds what COMPLIANT's lifecycle.rbac grants (no escalation: api/escalation.py).
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(name, {"metadata": {"name": "alice"},  # type: ignore[arg-type]
                                       "rules": COMPLIANT["lifecycle"]["rbac"]})
    rbac.create_namespaced_role_binding(name, {  # type: ignore[arg-type]
        "metadata": {"name": "alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "alice"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    # The API token's identity may read runs here (every API call is authorised by RBAC: api/access.py).
    ensure_roles(api)
    bind(api, "api-alice", [user("alice@example.com")], (VIEWER,), namespace=name)
    yield name
    core.delete_namespace(name)
    api.close()


@pytest.fixture(scope="module")
def app_state(localkube: Handle,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiSettings, State]]:
    tokens = tmp_path_factory.mktemp("admission") / "tokens"
    tokens.write_text(f"{TOKEN} alice@example.com\n")
    settings = ApiSettings(token_file=str(tokens))  # tokens on, as in production
    kube = config.new_client_from_config(str(localkube.kubeconfig))
    yield settings, State(settings, kube, None)
    kube.close()


@pytest.fixture
async def webhook(app_state: tuple[ApiSettings, State]) -> AsyncIterator[httpx.AsyncClient]:
    settings, state = app_state
    app = create_app(settings)
    # ASGITransport does not run the lifespan, which would also connect to Temporal (admission
    # never uses it): the state is set directly, with the real Kubernetes client.
    app.state.agentrun = state
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


def review(ns: str, obj: dict[str, Any] | None, *, op: str = "CREATE", old: dict[str, Any] | None = None,
           uid: str | None = None) -> dict[str, Any]:
    name = (obj or old or {}).get("metadata", {}).get("name", "")
    gvr = {"group": G, "version": V, "resource": "agentruns"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid or str(uuid.uuid4()), "kind": {"group": G, "version": V, "kind": "AgentRun"},
        "resource": gvr,
        "requestKind": {"group": G, "version": V, "kind": "AgentRun"}, "requestResource": gvr,
        "name": name, "namespace": ns, "operation": op,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{op.capitalize()}Options"}}}


def run(ns: str, agent: str, spec: dict[str, Any], *, name: str = "r1",
        ref: str = "agentRef") -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "AgentRun",
            "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "generation": 1},
            "spec": {ref: agent, **spec}}


async def admit(webhook: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await webhook.post("/admission/agentruns", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["apiVersion"], out["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert out["response"]["uid"] == body["request"]["uid"]
    resp: dict[str, Any] = out["response"]
    return resp


def assert_refused(resp: dict[str, Any], field: str, *rule: str) -> None:
    assert resp["allowed"] is False, resp
    status = resp["status"]
    assert (status["code"], status["reason"]) == (403, "Forbidden")
    assert status["message"].startswith(field + ":"), status["message"]
    for text in rule:
        assert text in status["message"], (text, status["message"])


Patch = Callable[[dict[str, Any]], None]


def with_(path: str, value: Any) -> Patch:
    def patch(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = spec
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return patch


VIOLATIONS: list[tuple[str, Patch, str, tuple[str, ...]]] = [
    ("denied-tool", with_("toolPolicy.allow", ["read_file", "shell"]), "spec.toolPolicy.allow[1]",
     ('tool "shell" is denied', "toolGating")),
    ("no-sandbox", with_("sandbox", None), "spec.sandbox.enabled", ("sandboxPolicy.required",)),
    ("sandbox-off", with_("sandbox.enabled", False), "spec.sandbox.enabled", ("sandboxPolicy.required",)),
    ("no-agent-sandbox", with_("agentSandbox", None), "spec.agentSandbox.enabled",
     ("sandboxPolicy.agentSandboxPolicy.required",)),
    ("runtime-class", with_("agentSandbox.runtimeClass", "runc"), "spec.agentSandbox.runtimeClass",
     ('"runc"', "allowedRuntimeClasses")),
    ("prerun-image", with_("lifecycle.preRun.0.image", "busybox:1.36"), "spec.lifecycle.preRun[0].image",
     ('"busybox:1.36"', "imagePolicy.allowedRegistries")),
    ("postrun-image", with_("lifecycle.postRun.0.image", "ghcr.io/other/x:1"),
     "spec.lifecycle.postRun[0].image",
     ('"ghcr.io/other/x:1"', "imagePolicy.allowedRegistries")),
    ("sandbox-image", with_("sandbox.image", "quay.io/x/sandbox:1"), "spec.sandbox.image",
     ("imagePolicy.allowedRegistries",)),
    ("rbac-secrets", with_("lifecycle.rbac.0.resources", ["configmaps", "secrets"]),
     "spec.lifecycle.rbac[0].resources", ('"secrets"', "lifecyclePolicy.deniedResources")),
    ("rbac-subresource", with_("lifecycle.rbac.0.resources", ["clusterroles/status"]),
     "spec.lifecycle.rbac[0].resources", ("lifecyclePolicy.deniedResources",)),
    ("listed-env", with_("env", {"DEBUG": "1"}), "spec.env.DEBUG", ("deniedEnv",)),
    ("too-deep", with_("parent.spawnDepth", 3), "spec.parent.spawnDepth", ("exceeds the maximum 2",
                                                                           "subagentPolicy.maxDepth")),
]


@pytest.mark.parametrize(("patch", "field", "rule"), [v[1:] for v in VIOLATIONS],
                         ids=[v[0] for v in VIOLATIONS])
async def test_each_policy_rule_refuses_a_violating_run_naming_field_and_rule(
        webhook: httpx.AsyncClient, ns: str, patch: Patch, field: str, rule: tuple[str, ...]) -> None:
    spec = copy.deepcopy(COMPLIANT)
    patch(spec)
    assert_refused(await admit(webhook, review(ns, run(ns, "guarded", spec))), field, 'policy "strict"', *rule)


async def test_a_compliant_run_is_admitted_without_warnings(webhook: httpx.AsyncClient, ns: str) -> None:
    resp = await admit(webhook, review(ns, run(ns, "guarded", COMPLIANT)))
    assert resp == {"uid": resp["uid"], "allowed": True}


@pytest.mark.parametrize("key", ALWAYS_DENIED_ENV)
async def test_always_denied_env_keys_are_refused_with_or_without_a_policy(
        webhook: httpx.AsyncClient, ns: str, key: str) -> None:
    assert_refused(await admit(webhook, review(ns, run(ns, "free", {"task": "t", "env": {key: "x"}}))),
                   f"spec.env.{key}", "always denied")
    spec = {**COMPLIANT, "env": {"MODE": "fast", key: "x"}}
    assert_refused(await admit(webhook, review(ns, run(ns, "guarded", spec))), f"spec.env.{key}",
                   "always denied")


DOCS_VIOLATIONS: list[tuple[str, Patch, str, tuple[str, ...]]] = [
    ("tool-not-allowed", with_("toolPolicy.allow", ["read_file", "git"]), "spec.toolPolicy.allow[1]",
     ('tool "git" is not allowed', "defaultAction: deny")),
    ("denied-tool", with_("toolPolicy.allow", ["fetch_url"]), "spec.toolPolicy.allow[0]", ("fetch_url: deny",)),
    ("no-sandbox", with_("sandbox", None), "spec.sandbox.enabled", ("sandboxPolicy.required",)),
    ("hook-image", with_("lifecycle.preRun.0.image", "busybox:1.36"), "spec.lifecycle.preRun[0].image",
     ("imagePolicy.allowedRegistries",)),
    ("rbac-secrets", with_("lifecycle.rbac.0.resources", ["secrets"]), "spec.lifecycle.rbac[0].resources",
     ("lifecyclePolicy.deniedResources",)),
    ("too-deep", with_("parent.spawnDepth", 3), "spec.parent.spawnDepth", ("subagentPolicy.maxDepth",)),
]


@pytest.mark.parametrize(("patch", "field", "rule"), [v[1:] for v in DOCS_VIOLATIONS],
                         ids=[v[0] for v in DOCS_VIOLATIONS])
async def test_a_docs_shape_template_policy_refuses_what_the_template_forbids(
        webhook: httpx.AsyncClient, ns: str, patch: Patch, field: str, rule: tuple[str, ...]) -> None:
    spec = copy.deepcopy(DOCS_COMPLIANT)
    patch(spec)
    assert_refused(await admit(webhook, review(ns, run(ns, "templated", spec))), field,
                   'policy "docs" (template Restrictive)', *rule)


async def test_a_docs_shape_template_policy_admits_a_compliant_run_and_warns_about_approval_tools(
        webhook: httpx.AsyncClient, ns: str) -> None:
    resp = await admit(webhook, review(ns, run(ns, "templated", DOCS_COMPLIANT)))
    assert resp["allowed"] is True and "status" not in resp and "warnings" not in resp
    spec = {**DOCS_COMPLIANT, "toolPolicy": {"allow": ["read_file", "deploy"]}}  # requireApproval: [deploy]
    resp = await admit(webhook, review(ns, run(ns, "templated", spec)))
    assert resp["allowed"] is True
    assert resp["warnings"] == ['tool "deploy" needs approval under policy "docs" (toolGating action: ask)']


async def test_the_default_template_admits_execute_command_with_a_warning(
        webhook: httpx.AsyncClient, ns: str) -> None:
    spec = {"task": "t", "toolPolicy": {"allow": ["execute_command"]}}
    resp = await admit(webhook, review(ns, run(ns, "asker", spec)))
    assert resp["allowed"] is True and "execute_command" in resp["warnings"][0]


async def test_the_default_policy_example_warns_only_of_what_it_asks_for(webhook: httpx.AsyncClient, ns: str,
                                                                          app_state: tuple[ApiSettings, State]) -> None:
    """examples/policies/default.yaml applied as it is: a run under it is told that execute_command needs an
    approval, and nothing of the policy is reported as having no effect here."""
    example = yaml.safe_load(DEFAULT_EXAMPLE)
    custom = client.CustomObjectsApi(app_state[1].kube.api)
    custom.create_namespaced_custom_object(G, V, ns, "sympoziumpolicies", {
        **example, "metadata": {"name": "default-example"}})
    custom.create_namespaced_custom_object(G, V, ns, "agents", _obj("Agent", "by-example", {
        "agents": {"default": {"model": "m"}}, "policyRef": "default-example"}))
    resp = await admit(webhook, review(ns, run(ns, "by-example", {"task": "t"})))
    assert resp["allowed"] is True and not [w for w in resp.get("warnings") or [] if "has no effect" in w], resp
    spec = {"task": "t", "toolPolicy": {"allow": ["execute_command"]}}
    resp = await admit(webhook, review(ns, run(ns, "by-example", spec)))
    assert resp["allowed"] is True and len(resp["warnings"]) == 1 and "execute_command" in resp["warnings"][0]


async def test_a_legacy_sympozium_instance_and_its_policy_are_enforced(
        webhook: httpx.AsyncClient, ns: str) -> None:
    legacy = {**COMPLIANT, "input": COMPLIANT["task"]}
    del legacy["task"]
    assert (await admit(webhook, review(ns, run(ns, "legacy", legacy, ref="instanceRef"))))["allowed"] is True
    bad = {**legacy, "toolPolicy": {"allow": ["shell"]}}
    assert_refused(await admit(webhook, review(ns, run(ns, "legacy", bad, ref="instanceRef"))),
                   "spec.toolPolicy.allow[0]", 'policy "strict"', "toolGating")


@pytest.mark.parametrize(("agent", "spec", "field"), [
    ("nobody", {"task": "t"}, "spec.agentRef"),
    ("", {"task": "t"}, "spec.agentRef"),
    ("dangling", {"task": "t"}, "agent policyRef"),
    ("guarded", {**COMPLIANT, "timeout": "soon"}, "spec.timeout"),
    ("free", {"task": "   "}, "spec.task"),
])
async def test_spec_problems_that_are_not_policy_rules_are_admitted_with_a_warning(
        webhook: httpx.AsyncClient, ns: str, agent: str, spec: dict[str, Any], field: str) -> None:
    """The workflow fails these at start naming the field, so the user has a run that says why."""
    resp = await admit(webhook, review(ns, run(ns, agent, spec)))
    assert resp["allowed"] is True and "status" not in resp
    assert len(resp["warnings"]) == 1 and f"will fail when it starts unless this is fixed first: {field}:" in \
        resp["warnings"][0]


async def test_an_update_is_checked_only_when_the_spec_changes(
        webhook: httpx.AsyncClient, ns: str) -> None:
    old = run(ns, "guarded", COMPLIANT)
    stale = run(ns, "guarded", {**COMPLIANT, "toolPolicy": {"allow": ["shell"]}})
    # A spec edit that breaks the policy is refused like a create...
    edited = {**old, "spec": stale["spec"]}
    assert_refused(await admit(webhook, review(ns, edited, op="UPDATE", old=old)), "spec.toolPolicy.allow[0]",
                   "toolGating")
    # ...but metadata changes (finalizers, the gate-verdict annotation) always pass, so a policy
    # tightened while a run is in flight never blocks its cleanup or its gate (the verdict written by the
    # run's gate hook, which alone may write it under a policy without gatePolicy approvers).
    tagged = copy.deepcopy(stale)
    tagged["metadata"]["finalizers"] = ["agentrun.dev/cleanup"]
    tagged["metadata"]["annotations"] = {"sympozium.ai/gate-verdict": '{"action": "approve"}'}
    by_gate_hook = review(ns, tagged, op="UPDATE", old=stale)
    by_gate_hook["request"]["userInfo"]["username"] = f"system:serviceaccount:{ns}:sympozium-lifecycle-r1"
    assert (await admit(webhook, by_gate_hook))["allowed"] is True
    deleting = copy.deepcopy(edited)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert (await admit(webhook, review(ns, deleting, op="UPDATE", old=old)))["allowed"] is True


async def test_deletes_and_status_writes_are_admitted_unchecked(
        webhook: httpx.AsyncClient, ns: str) -> None:
    bad = run(ns, "guarded", {"task": "t", "toolPolicy": {"allow": ["shell"]}})
    assert (await admit(webhook, review(ns, None, op="DELETE", old=bad)))["allowed"] is True
    status_write = review(ns, bad, op="UPDATE", old=run(ns, "guarded", {"task": "t"}))
    status_write["request"]["subResource"] = "status"
    assert (await admit(webhook, status_write))["allowed"] is True


async def test_a_policy_that_cannot_be_read_refuses_the_run_saying_so(webhook: httpx.AsyncClient, ns: str,
                                                                localkube: Handle) -> None:
    localkube.inject_fault(namespace=ns, verb="get", resource="sympoziumpolicies", name="strict", code=500,
                           times=1)
    try:
        resp = await admit(webhook, review(ns, run(ns, "guarded", COMPLIANT)))
    finally:
        localkube.clear_faults()
    assert resp["allowed"] is False
    assert (resp["status"]["code"], resp["status"]["reason"]) == (503, "ServiceUnavailable")
    assert "cannot check the run against its Agent's policy" in resp["status"]["message"]
    assert "sympoziumpolicies" in resp["status"]["message"] and "500" in resp["status"]["message"]
    # Once the policy can be read again, the same run is admitted.
    assert (await admit(webhook, review(ns, run(ns, "guarded", COMPLIANT))))["allowed"] is True


async def test_a_policy_read_that_hangs_refuses_the_run_before_the_apiserver_gives_up(
        webhook: httpx.AsyncClient, ns: str, localkube: Handle) -> None:
    # Every read hangs past the per-read timeout (the client retries timed-out reads): the whole
    # evaluation's deadline answers.
    localkube.inject_fault(namespace=ns, verb="get", resource="sympoziumpolicies", name="strict",
                           delay_seconds=READ_TIMEOUT_SECONDS + 2, times=-1)
    try:
        started = time.monotonic()
        resp = await admit(webhook, review(ns, run(ns, "guarded", COMPLIANT)))
        took = time.monotonic() - started
    finally:
        localkube.clear_faults()
    assert resp["allowed"] is False and resp["status"]["code"] == 503
    assert "reading the Agent and policy took over" in resp["status"]["message"]
    assert took < 10, "the answer must beat the webhook's timeoutSeconds (10)"


def _good(ns: str) -> dict[str, Any]:
    return review(ns, run(ns, "guarded", COMPLIANT))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def make(body: dict[str, Any]) -> dict[str, Any]:
        with_(path, value)(body)
        return body
    return make


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("list", lambda b: [b], "AdmissionReview"),
    ("v1beta1", _set("apiVersion", "admission.k8s.io/v1beta1"), "apiVersion"),
    ("wrong-kind", _set("kind", "TokenReview"), "kind"),
    ("no-request", _set("request", None), "request"),
    ("no-uid", _set("request.uid", None), "request.uid"),
    ("empty-uid", _set("request.uid", ""), "request.uid"),
    ("int-uid", _set("request.uid", 42), "request.uid"),
    ("bad-operation", _set("request.operation", "PATCH"), "request.operation"),
    ("no-resource", _set("request.resource", None), "request.resource"),
    ("other-resource", _set("request.resource", {"group": "", "version": "v1", "resource": "pods"}), "pods"),
    ("no-object", _set("request.object", None), "request.object"),
    ("object-not-a-map", _set("request.object", "run"), "request.object"),
    ("spec-not-a-map", _set("request.object.spec", ["task"]), "request.object.spec"),
    ("metadata-not-a-map", _set("request.object.metadata", "x"), "request.object.metadata"),
    ("uid-not-a-string", _set("request.object.metadata.uid", 7), "request.object.metadata.uid"),
    ("labels-not-strings", _set("request.object.metadata.labels", {"a": {"b": 1}}),
     "request.object.metadata.labels"),
    ("no-namespace", lambda b: _set("request.object.metadata.namespace", None)(_set("request.namespace", "")(b)),
     "request.namespace"),
]


@pytest.mark.parametrize(("mangle", "mentions"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
async def test_malformed_reviews_get_400_with_a_json_detail(webhook: httpx.AsyncClient, ns: str,
                                                      mangle: Callable[[dict[str, Any]], Any], mentions: str) -> None:
    r = await webhook.post("/admission/agentruns", json=mangle(_good(ns)))
    assert r.status_code == 400, r.text
    assert mentions in r.json()["detail"], r.json()


@pytest.mark.parametrize("body", [b"", b"not json", b"\xff\xfe", b"{", b"null", b"42"])
async def test_bodies_that_are_not_json_objects_get_400(webhook: httpx.AsyncClient, body: bytes) -> None:
    r = await webhook.post("/admission/agentruns", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and isinstance(r.json()["detail"], str)


async def test_the_webhook_needs_no_bearer_token_while_api_routes_do(
        webhook: httpx.AsyncClient, ns: str) -> None:
    assert (await webhook.get("/api/v1/runs")).status_code == 401
    authorised = await webhook.get("/api/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"},
                                   params={"namespace": ns})
    assert authorised.status_code == 200
    assert (await webhook.post("/admission/agentruns", json=_good(ns))).status_code == 200


def test_tls_settings_must_come_in_pairs(tmp_path: Path) -> None:
    from api.serve import main
    with pytest.raises(SystemExit) as e:
        main(["--insecure", "--tls-cert", str(tmp_path / "cert.pem")])
    assert e.value.code == 2


# -- Sympozium fields with no effect here, and backends not offered (models/compat.py) --------------------------------

CHATTY_AGENT = {"agents": {"default": {"model": "m", "providerHeaders": {"X-Team": "ops"}}},
                "channels": [{"type": "slack", "configRef": {"secret": "slack"}}],
                "memory": {"maxSizeKB": 64},  # enabled by default, as in Sympozium
                "observability": {"enabled": False},  # off: nothing to warn about
                "mcpServers": [{"name": "t", "toolsPrefix": "t"}]}


async def test_fields_with_no_effect_here_are_admitted_with_a_warning_naming_each(
        webhook: httpx.AsyncClient, ns: str, localkube: Handle) -> None:
    api = config.new_client_from_config(str(localkube.kubeconfig))
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "agents",
                                                                     _obj("Agent", "chatty", CHATTY_AGENT))
    finally:
        api.close()
    spec = {"task": "t", "dryRun": True, "useContext": True, "canaryMode": False,
            "model": {"modelRef": "lab-llama"}, "volumes": [{"name": "v", "emptyDir": {}}]}
    resp = await admit(webhook, review(ns, run(ns, "chatty", spec)))
    assert resp["allowed"] is True and "status" not in resp
    assert [w.split(":")[0] for w in resp["warnings"]] == [
        "spec.dryRun", "spec.volumes", "spec.model.modelRef",
        'Agent "chatty" spec.channels', 'Agent "chatty" spec.memory', 'Agent "chatty" spec.mcpServers',
        'Agent "chatty" spec.agents.default.providerHeaders']
    assert all(": has no effect here (" in w for w in resp["warnings"])
    # The same run with none of them set has nothing to warn about.
    resp = await admit(webhook, review(ns, run(ns, "free", {"task": "t", "useContext": True, "dryRun": False})))
    assert resp == {"uid": resp["uid"], "allowed": True}


@pytest.mark.parametrize(("spec", "field", "text"), [
    ({"mode": "server"}, "spec.mode", 'mode "server" is not offered here'),
    ({"agentSandbox": {"enabled": True, "warmPoolRef": "pool"}}, "spec.agentSandbox.warmPoolRef",
     "warm pool is not offered here"),
])
async def test_a_backend_not_offered_here_is_refused_naming_the_field(
        webhook: httpx.AsyncClient, ns: str, spec: dict[str, Any], field: str, text: str) -> None:
    assert_refused(await admit(webhook, review(ns, run(ns, "free", {"task": "t", **spec}))), field, text)


def agent_review(ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    body = review(ns, {**_obj("Agent", "a1", spec), "metadata": {"name": "a1", "namespace": ns}})
    gvr = {"group": G, "version": V, "resource": "agents"}
    body["request"].update(kind={"group": G, "version": V, "kind": "Agent"}, resource=gvr, requestResource=gvr)
    return body


async def test_the_agents_webhook_warns_about_fields_with_no_effect_and_refuses_a_warm_pool(
        webhook: httpx.AsyncClient, ns: str) -> None:
    r = await webhook.post("/admission/agents", json=agent_review(ns, CHATTY_AGENT))
    resp = r.json()["response"]
    assert resp["allowed"] is True
    assert [w.split(":")[0] for w in resp["warnings"]] == [
        "spec.channels", "spec.memory", "spec.mcpServers", "spec.agents.default.providerHeaders"]
    warm = {"agents": {"default": {"model": "m", "agentSandbox": {"enabled": True, "warmPool": {"size": 2}}}}}
    resp = (await webhook.post("/admission/agents", json=agent_review(ns, warm))).json()["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert resp["status"]["message"].startswith("spec.agents.default.agentSandbox.warmPool: warm pools")


async def test_a_sub_agent_beyond_its_parents_limits_is_refused_at_admission(
        webhook: httpx.AsyncClient, localkube: Handle) -> None:
    """The parent's Agent allows one child: with one stored, kubectl is refused a second at once (the worker's check
    at start still holds for children created at the same moment)."""
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"sub-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})  # type: ignore[arg-type]
    try:
        custom.create_namespaced_custom_object(G, V, ns, "agents", _obj("Agent", "lead", {"agents": {"default": {
            "model": "m", "subagents": {"maxDepth": 1, "maxChildrenPerAgent": 1}}}}))
        parent = {"agentRef": "lead", "task": "plan"}
        custom.create_namespaced_custom_object(G, V, ns, "agentruns", {**run(ns, "lead", parent, name="boss"),
                                                                       "metadata": {"name": "boss"}})
        child: dict[str, Any] = {"task": "part", "parent": {"runName": "boss", "sessionKey": "s", "spawnDepth": 1}}
        first = run(ns, "lead", child, name="part-1")
        del first["metadata"]["uid"]  # a CREATE: not stored yet
        assert (await admit(webhook, review(ns, first)))["allowed"] is True
        custom.create_namespaced_custom_object(G, V, ns, "agentruns", {**first, "metadata": {"name": "part-1"}})

        second = run(ns, "lead", child, name="part-2")
        del second["metadata"]["uid"]
        assert_refused(await admit(webhook, review(ns, second)), "spec.parent.runName",
                       'parent run "boss" already has 1 sub-agents', "maxChildrenPerAgent")
        too_deep = run(ns, "lead", {**child, "parent": {**child["parent"], "spawnDepth": 2}}, name="deep")
        assert_refused(await admit(webhook, review(ns, too_deep)), "spec.parent.spawnDepth",
                       "exceeds the maximum 1", "maxDepth")
        # A parent not stored yet (applied in the same kubectl apply, say) is not a refusal: the run fails at start.
        orphan = run(ns, "lead", {**child, "parent": {**child["parent"], "runName": "later"}}, name="orphan")
        out = await admit(webhook, review(ns, orphan))
        assert out["allowed"] is True and 'parent AgentRun "later" not found' in out["warnings"][0], out
    finally:
        core.delete_namespace(ns)
        api.close()


async def test_a_skill_pack_that_does_not_exist_is_admitted_with_a_warning_naming_it(
        webhook: httpx.AsyncClient, ns: str) -> None:
    spec = {"task": "t", "skills": [{"skillPackRef": "skillpack-k8s-ops"}, {"configMapRef": "my-skills"}]}
    out = await admit(webhook, review(ns, run(ns, "free", spec)))
    assert out["allowed"] is True, out
    assert out["warnings"] == [f'spec.skills: SkillPack "skillpack-k8s-ops" not found in namespace "{ns}": skipped, '
                               "the run starts without it"], out


async def test_a_misspelt_provider_is_refused_with_the_name_it_resembles(webhook: httpx.AsyncClient,
                                                                         ns: str) -> None:
    """A provider name close to a known one, with no baseURL, would fail the run at start: refused at once instead."""
    resp = await admit(webhook, review(ns, run(ns, "free", {"task": "t", "model": {"provider": "opneai"}})))
    assert_refused(resp, "spec.model.provider", 'unknown provider "opneai": did you mean "openai"?')
    # A name of its own with a baseURL is an OpenAI-compatible endpoint, not a typo.
    resp = await admit(webhook, review(ns, run(ns, "free", {"task": "t", "model": {
        "provider": "opneai", "baseURL": "http://models.example/v1"}})))
    assert resp["allowed"] is True
