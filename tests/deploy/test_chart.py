"""The Helm chart through Helm's own engine (helm-python-sdk binds Helm's Go library): strict lint, a render
for every combination of values users pick, and claims about what it renders — restricted pods, least-privilege
RBAC matching what the code calls, the environment each process reads, the webhook's certificate."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from cryptography import x509

from models.crds import all_crds, render

CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart" / "agentrun"
NS = "agentrun-system"

Doc = dict[str, Any]

# What each component's code asks of the Kubernetes API: (apiGroup, resource, verb), in every served namespace.
# Derived from the client calls (grep `_namespaced_`/`_custom_object` in activities/, bridge/, api/); the chart's
# rules must grant exactly these — nothing more (least privilege), nothing less (the process would fail).
NEEDS: dict[str, set[tuple[str, str, str]]] = {
    "worker": {
        *(("sympozium.ai", "agentruns", v) for v in ("get", "list", "create", "patch", "delete")),  # kube/schedules/prune
        ("sympozium.ai", "agentruns/status", "patch"),  # activities/kube.py status writes
        *(("sympozium.ai", r, v) for r in ("agents", "sympoziuminstances", "sympoziumpolicies")
          for v in ("get", "list", "watch")),  # resolve (informer, or a read), prune
        ("sympozium.ai", "sympoziumschedules", "get"),  # activities/schedules.py reads its schedule
        ("sympozium.ai", "sympoziumschedules/status", "patch"),  # ... and records its ticks
        *(("batch", "jobs", v) for v in ("get", "list", "watch", "create", "delete", "deletecollection")),  # informer
        ("", "pods", "list"), ("", "pods", "watch"), ("", "pods/log", "get"),  # exit codes, the result; informer
        *(("", r, v) for r in ("persistentvolumeclaims", "serviceaccounts") for v in ("get", "create", "delete")),
        *(("rbac.authorization.k8s.io", r, v) for r in ("roles", "rolebindings") for v in ("get", "create", "delete")),
        ("sympozium.ai", "skillpacks", "get"),  # models/skills.py: a run's SkillPacks at start
        ("", "serviceaccounts/token", "create"),  # a SkillPack sidecar's token (activities/skill_manifests.py)
        *(("", "secrets", v) for v in ("create", "delete")),  # ... kept in its per-run Secret (never read)
        ("", "configmaps", "create"), ("", "configmaps", "patch"),  # kept logs, <run>-logs (models/run_logs.py)
        # worker.grantableRules (default): what lifecycle Roles may grant
        *(("", "configmaps", v) for v in ("get", "list", "create", "patch", "delete")),
    },
    "bridge": {
        *(("sympozium.ai", "agentruns", v) for v in ("get", "list", "watch", "patch")),  # watch, finalizer cleanup
        *(("sympozium.ai", "sympoziumschedules", v) for v in ("list", "watch", "patch")),
        ("sympozium.ai", "sympoziumschedules/status", "patch"),
        ("batch", "jobs", "list"), ("batch", "jobs", "watch"),
        # bridge/skillpacks.py: a SkillPack's generated ConfigMap and its status
        ("sympozium.ai", "skillpacks", "list"), ("sympozium.ai", "skillpacks", "watch"),
        ("sympozium.ai", "skillpacks/status", "patch"),
        *(("", "configmaps", v) for v in ("get", "create", "patch")),
        # bridge/model_status.py: each Model marked as not served here
        ("sympozium.ai", "models", "list"), ("sympozium.ai", "models", "watch"), ("sympozium.ai", "models/status", "patch"),
        # bridge/personas.py: packs watched, their status; the Agents and schedules they stamp out
        *(("sympozium.ai", r, v) for r in ("ensembles", "personapacks") for v in ("get", "list", "watch")),
        ("sympozium.ai", "ensembles/status", "patch"), ("sympozium.ai", "personapacks/status", "patch"),
        ("sympozium.ai", "ensembles/finalizers", "update"), ("sympozium.ai", "personapacks/finalizers", "update"),
        *(("sympozium.ai", r, v) for r in ("agents", "sympoziumschedules")
          for v in ("get", "list", "create", "update", "patch", "delete")),
    },
    "api": {
        *(("sympozium.ai", "agentruns", v) for v in ("get", "list", "watch", "create", "delete")),  # runwatch
        # read, and listed + watched for a verdict's authority (kube/informer.py with kinds=DEFINITIONS)
        *(("sympozium.ai", r, v) for r in ("agents", "sympoziuminstances", "sympoziumpolicies")
          for v in ("get", "list", "watch")),
        *(("sympozium.ai", "sympoziumschedules", v) for v in ("get", "list", "create", "patch", "delete")),
        ("sympozium.ai", "skillpacks", "get"),  # api/admission.py: a run's SkillPacks, as the worker reads them
        ("", "events", "create"),  # api/authority.py: a refused verdict is a VerdictRefused Event on its run
        # api/logs.py: a run's pods and their logs, then the tail kept in its ConfigMap <run>-logs
        ("", "pods", "list"), ("", "pods/log", "get"), ("", "configmaps", "get"),
        # api/escalation.py: a run's lifecycle.rbac is reviewed against what its creator holds
        ("authorization.k8s.io", "localsubjectaccessreviews", "create"),
    },
}
# Cluster-wide even with watchNamespaces: bridge/verdicts.py reads the one MutatingWebhookConfiguration that stamps
# verdicts (get on exactly its name).
WEBHOOK_READ = [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
                 "resourceNames": ["agentrun-agentruns"], "verbs": ["get"]}]
# Cluster-wide even with watchNamespaces: the worker checks that a run's RuntimeClass exists (cluster-scoped).
RUNTIMECLASS_READ = [{"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["get"]}]
# Cluster-wide even with watchNamespaces: the API asks the cluster who a token is (api/auth.py), what its caller may
# do (api/access.py) and whether a SkillPack's author holds its clusterRBAC (api/escalation.py): cluster-scoped kinds.
API_REVIEWS = [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
               {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
# The ClusterRoles people are bound to (models/roles.py): no grant to a component, and the same with watchNamespaces.
PEOPLES_ROLES = ["agentrun-approver", "agentrun-editor", "agentrun-viewer"]
# Only in the release's namespace: bridge/leader.py's Lease.
LEASE = {("coordination.k8s.io", "leases", v) for v in ("create", "get", "patch")}
# Only in the release's namespace: api/console/sessions.py's Secrets (one per console session), with no list.
SESSIONS = {("", "secrets", v) for v in ("create", "get", "delete", "deletecollection")}

ENV = {
    "common": {"AGENTRUN_TEMPORAL__ADDRESS", "AGENTRUN_TEMPORAL__NAMESPACE", "AGENTRUN_TEMPORAL__TASK_QUEUE",
               "AGENTRUN_TEMPORAL__TLS", "AGENTRUN_KUBE__KUBECONFIG", "AGENTRUN_KUBE__QPS", "AGENTRUN_KUBE__BURST"},
    "worker": {"AGENTRUN_NATS__URL", "AGENTRUN_AGENT_IMAGE", "AGENTRUN_FALLBACK_POLL_SECONDS", "AGENTRUN_NAMESPACES",
               "AGENTRUN_AGENT_RESTARTS",
               "AGENTRUN_MAX_CONCURRENT_ACTIVITIES", "AGENTRUN_MAX_CACHED_WORKFLOWS", "AGENTRUN_SETUP_SEARCH_ATTRIBUTES",
               "AGENTRUN_HEALTH__HOST", "AGENTRUN_HEALTH__PORT", "AGENTRUN_METRICS_ADDRESS", "AGENTRUN_KEEP_LOG_BYTES"},
    "bridge": {"AGENTRUN_NAMESPACES", "AGENTRUN_LEASE_NAMESPACE", "AGENTRUN_LEASE_NAME", "AGENTRUN_LEASE_SECONDS",
               "AGENTRUN_IDENTITY", "AGENTRUN_SCHEDULE_RESYNC_SECONDS", "AGENTRUN_PRUNE__ENABLED", "AGENTRUN_PRUNE__KEEP",
               "AGENTRUN_PRUNE__INTERVAL_SECONDS", "AGENTRUN_HEALTH__HOST", "AGENTRUN_HEALTH__PORT",
               "AGENTRUN_VERDICT_WEBHOOK"},
    "api": {"AGENTRUN_HOST", "AGENTRUN_PORT", "AGENTRUN_TOKEN_FILE", "AGENTRUN_AGENT_IMAGE", "AGENTRUN_TRUSTED__API",
            "AGENTRUN_TRUSTED__WORKER", "AGENTRUN_TRUSTED__BRIDGE", "AGENTRUN_NAMESPACES", "AGENTRUN_TOKEN_REVIEW",
            "AGENTRUN_TOKEN_REVIEW_AUDIENCES", "AGENTRUN_FORWARDED_ALLOW_IPS", "AGENTRUN_SESSION_NAMESPACE"},
}

TLS_ALL = {"temporal": {"address": "ns.acct.tmprl.cloud:7233", "tls": {"existingSecret": "temporal-mtls",
                                                                       "serverCA": True, "clientCert": True,
                                                                       "serverName": "ns.acct.tmprl.cloud"},
                        "apiKey": {"existingSecret": "temporal-key"}, "setupJob": {"enabled": True}}}
MATRIX: dict[str, list[dict[str, Any]]] = {
    "namespaces": [{}, {"watchNamespaces": ["team-a", "team-b"]}],
    "webhook": [{}, {"webhook": {"enabled": False}}, {"webhook": {"certManager": {"enabled": True}}}],
    "temporal": [{}, TLS_ALL, {"temporal": {"address": "t:7233", "apiKey": {"existingSecret": "k", "key": "key"}}}],
    "extras": [{}, {"networkPolicy": {"enabled": True}, "serviceMonitor": {"enabled": True}, "listenOnPodIP": True,
                    "api": {"ingress": {"enabled": True, "tlsSecret": "api-tls"}}}],
}


def merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


COMBINATIONS = [merge(*combo) for combo in itertools.product(*MATRIX.values())]


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    c = helm.Chart.load(str(CHART))
    yield c
    c.close()


def rendered(chart: helm.Chart, values: dict[str, Any]) -> list[Doc]:
    out = chart.render(values, name="agentrun", namespace=NS, is_install=True)
    return [d for path, text in sorted(out.items()) if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]


def of(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def pod_specs(docs: list[Doc]) -> list[tuple[str, Doc]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs if d["kind"] in ("Deployment", "Job")]


def component_env(docs: list[Doc], component: str) -> dict[str, Any]:
    dep = next(d for d in of(docs, "Deployment") if d["metadata"]["name"] == f"agentrun-{component}")
    return {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}


def granted(docs: list[Doc], component: str, namespace: str | None) -> set[tuple[str, str, str]]:
    kind = "ClusterRole" if namespace is None else "Role"
    roles = [d for d in of(docs, kind) if d["metadata"]["name"] == f"agentrun-{component}"
             and d["metadata"].get("namespace") == namespace]
    assert len(roles) == 1, f"{kind} agentrun-{component} in {namespace}"
    return {(g, r, v) for rule in roles[0]["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_the_chart_passes_helms_strict_lint() -> None:
    for values in ({}, COMBINATIONS[-1]):
        report = helm.lint(str(CHART), values, strict=True, namespace=NS)
        assert report["errors"] == [], report
        assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


@pytest.mark.parametrize("values", COMBINATIONS, ids=[f"combo{i}" for i in range(len(COMBINATIONS))])
def test_every_pod_is_restricted_resourced_and_probed(chart: helm.Chart, values: dict[str, Any]) -> None:
    docs = rendered(chart, values)
    specs = pod_specs(docs)
    assert {n for n, _ in specs} >= {"agentrun-worker", "agentrun-bridge", "agentrun-api"}
    for name, spec in specs:
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                           "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}}, name
        for c in spec["containers"]:
            assert c["securityContext"] == {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                            "privileged": False, "capabilities": {"drop": ["ALL"]}}, name
            assert c["resources"]["requests"] and c["resources"]["limits"], name
            mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounts, f"{name}: a read-only root needs a writable /tmp"
            volumes = {v["name"] for v in spec.get("volumes", [])}
            assert {m["name"] for m in c.get("volumeMounts", [])} <= volumes, name
            if name.startswith("agentrun-") and spec.get("restartPolicy", "Always") == "Always":
                ports = {p["name"] for p in c["ports"]}
                for probe in ("livenessProbe", "readinessProbe"):
                    assert c[probe]["httpGet"]["port"] in ports, f"{name} {probe}"


@pytest.mark.parametrize("values", COMBINATIONS, ids=[f"combo{i}" for i in range(len(COMBINATIONS))])
def test_no_role_has_a_wildcard_or_an_escalating_verb(chart: helm.Chart, values: dict[str, Any]) -> None:
    docs = rendered(chart, values)
    roles = of(docs, "Role") + of(docs, "ClusterRole")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], (role["metadata"]["name"], rule)
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), (role["metadata"]["name"], rule)


def test_cluster_wide_rbac_is_exactly_what_the_code_calls(chart: helm.Chart) -> None:
    docs = rendered(chart, {})
    for component, needs in NEEDS.items():
        assert granted(docs, component, None) == needs, component
    webhook_read = next(r for r in of(docs, "ClusterRole") if r["metadata"]["name"] == "agentrun-bridge-webhook")
    assert webhook_read["rules"] == WEBHOOK_READ
    rc_read = next(r for r in of(docs, "ClusterRole") if r["metadata"]["name"] == "agentrun-worker-runtimeclasses")
    assert rc_read["rules"] == RUNTIMECLASS_READ
    reviews = next(r for r in of(docs, "ClusterRole") if r["metadata"]["name"] == "agentrun-api-reviews")
    assert reviews["rules"] == API_REVIEWS
    assert all(r["metadata"]["namespace"] == NS for r in of(docs, "Role"))
    assert sorted(r["metadata"]["name"] for r in of(docs, "Role")) == ["agentrun-api-sessions", "agentrun-bridge-lease"]
    assert namespaced_grants(docs, "agentrun-bridge-lease", NS) == LEASE
    assert namespaced_grants(docs, "agentrun-api-sessions", NS) == SESSIONS


def namespaced_grants(docs: list[Doc], name: str, namespace: str) -> set[tuple[str, str, str]]:
    """What the Role `name` in `namespace` grants, as (group, resource, verb), checked to be bound to its component's
    ServiceAccount only."""
    role = next(r for r in of(docs, "Role") if r["metadata"]["name"] == name and r["metadata"]["namespace"] == namespace)
    binding = next(b for b in of(docs, "RoleBinding")
                   if b["metadata"]["name"] == name and b["metadata"]["namespace"] == namespace)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name.rsplit("-", 1)[0], "namespace": NS}]
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_the_api_keeps_console_sessions_in_its_own_namespace_only_without_list(chart: helm.Chart) -> None:
    """Sessions are Secrets of the API's namespace (the pod's, through the downward API); the API may create, get and
    delete them there and sweep expired ones with a selector, never list Secrets (that would return their data) nor
    touch a Secret of any other namespace, with or without watchNamespaces."""
    for values in ({}, {"watchNamespaces": ["team-a", "team-b"]}):
        docs = rendered(chart, values)
        assert component_env(docs, "api")["AGENTRUN_SESSION_NAMESPACE"]["valueFrom"] == {
            "fieldRef": {"fieldPath": "metadata.namespace"}}
        assert namespaced_grants(docs, "agentrun-api-sessions", NS) == SESSIONS
        secret_rules = [(r["metadata"]["name"], r["metadata"].get("namespace"), rule["verbs"])
                        for r in of(docs, "Role") + of(docs, "ClusterRole") for rule in r["rules"]
                        if "secrets" in rule["resources"] and "agentrun-api" in r["metadata"]["name"]]
        assert secret_rules == [("agentrun-api-sessions", NS, ["create", "get", "delete", "deletecollection"])]


def test_listed_namespaces_get_roles_and_no_cluster_roles(chart: helm.Chart) -> None:
    docs = rendered(chart, {"watchNamespaces": ["team-a", "team-b"]})
    # The cluster-wide grants left, on cluster-scoped objects: the worker's read of RuntimeClasses, the bridge's of
    # the verdict webhook's configuration, the API's reviews; and the roles people are bound to, which grant no
    # component anything.
    assert sorted((r["metadata"]["name"], r["rules"]) for r in of(docs, "ClusterRole")
                  if r["metadata"]["name"] not in PEOPLES_ROLES) == [
        ("agentrun-api-reviews", API_REVIEWS), ("agentrun-bridge-webhook", WEBHOOK_READ),
        ("agentrun-worker-runtimeclasses", RUNTIMECLASS_READ)]
    assert sorted((b["roleRef"]["name"], b["subjects"]) for b in of(docs, "ClusterRoleBinding")) == [
        ("agentrun-api-reviews", [{"kind": "ServiceAccount", "name": "agentrun-api", "namespace": NS}]),
        ("agentrun-bridge-webhook", [{"kind": "ServiceAccount", "name": "agentrun-bridge", "namespace": NS}]),
        ("agentrun-worker-runtimeclasses",
         [{"kind": "ServiceAccount", "name": "agentrun-worker", "namespace": NS}])]
    for ns in ("team-a", "team-b"):
        for component, needs in NEEDS.items():
            assert granted(docs, component, ns) == needs, (component, ns)
        binding = next(b for b in of(docs, "RoleBinding") if b["metadata"] == {**b["metadata"], "namespace": ns,
                                                                                 "name": "agentrun-worker"})
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "agentrun-worker", "namespace": NS}]
        agent_sa = next(s for s in of(docs, "ServiceAccount") if s["metadata"].get("namespace") == ns)
        assert agent_sa["metadata"]["name"] == "sympozium-agent"
        assert agent_sa["automountServiceAccountToken"] is False
    assert component_env(docs, "bridge")["AGENTRUN_NAMESPACES"]["value"] == '["team-a","team-b"]'
    hook = of(docs, "ValidatingWebhookConfiguration")[0]["webhooks"][0]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a", "team-b"]
    for hook in of(docs, "MutatingWebhookConfiguration")[0]["webhooks"]:
        assert hook["namespaceSelector"] == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}]}


NODES_READ = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


@pytest.mark.parametrize("namespaces", [[], ["team-a"]], ids=["cluster", "watchNamespaces"])
def test_the_worker_holds_cluster_wide_only_the_rules_a_skill_packs_cluster_rbac_may_grant(
        chart: helm.Chart, namespaces: list[str]) -> None:
    assert not any(r["metadata"]["name"] == "agentrun-worker-cluster-grants"
                   for r in of(rendered(chart, {"watchNamespaces": namespaces}), "ClusterRole")), "none by default"
    docs = rendered(chart, {"watchNamespaces": namespaces, "worker": {"grantableClusterRules": NODES_READ}})
    role = next(r for r in of(docs, "ClusterRole") if r["metadata"]["name"] == "agentrun-worker-cluster-grants")
    assert role["rules"] == [{"apiGroups": ["rbac.authorization.k8s.io"],
                              "resources": ["clusterroles", "clusterrolebindings"],
                              "verbs": ["get", "list", "create", "delete"]}, *NODES_READ]
    binding = next(b for b in of(docs, "ClusterRoleBinding")
                   if b["metadata"]["name"] == "agentrun-worker-cluster-grants")
    assert binding["roleRef"]["name"] == "agentrun-worker-cluster-grants"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "agentrun-worker", "namespace": NS}]
    assert component_env(docs, "worker")["AGENTRUN_AGENT_RESTARTS"]["value"] == "2"


def test_each_process_gets_exactly_the_variables_it_reads(chart: helm.Chart) -> None:
    docs = rendered(chart, {})
    for component in ("worker", "bridge", "api"):
        env = component_env(docs, component)
        assert ENV["common"] | ENV[component] <= set(env), component
        assert env["AGENTRUN_KUBE__KUBECONFIG"]["value"] == "", "in-cluster configuration"
        assert env["AGENTRUN_TEMPORAL__TLS"]["value"] == "false"
    bridge = component_env(docs, "bridge")
    assert bridge["AGENTRUN_LEASE_NAMESPACE"]["value"] == NS
    assert bridge["AGENTRUN_IDENTITY"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert bridge["AGENTRUN_NAMESPACES"]["value"] == "[]"
    assert component_env(docs, "worker")["AGENTRUN_AGENT_IMAGE"]["value"] == "agentrun-agent:0.1.0"
    assert component_env(docs, "api")["AGENTRUN_HOST"]["value"] == "0.0.0.0"
    # The Lease Role names the Lease the bridge uses.
    lease_role = next(r for r in of(docs, "Role") if r["metadata"]["name"] == "agentrun-bridge-lease")
    names = {n for rule in lease_role["rules"] for n in rule.get("resourceNames", [])}
    assert names == {bridge["AGENTRUN_LEASE_NAME"]["value"]}


def test_temporal_tls_files_point_into_the_mounted_secrets(chart: helm.Chart) -> None:
    docs = rendered(chart, TLS_ALL)
    for name, spec in pod_specs(docs):
        c = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["AGENTRUN_TEMPORAL__TLS"] == "true", name
        assert env["AGENTRUN_TEMPORAL__SERVER_NAME"] == "ns.acct.tmprl.cloud"
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
        for var, volume, secret, key in (
                ("AGENTRUN_TEMPORAL__SERVER_CA_FILE", "temporal-tls", "temporal-mtls", "ca.crt"),
                ("AGENTRUN_TEMPORAL__CLIENT_CERT_FILE", "temporal-tls", "temporal-mtls", "tls.crt"),
                ("AGENTRUN_TEMPORAL__CLIENT_KEY_FILE", "temporal-tls", "temporal-mtls", "tls.key"),
                ("AGENTRUN_TEMPORAL__API_KEY_FILE", "temporal-api-key", "temporal-key", "api-key")):
            assert env[var] == f"{mounts[volume]}/{key}", (name, var)
            assert volumes[volume]["secretName"] == secret
    job = next(d for d in of(docs, "Job") if d["metadata"]["name"] == "agentrun-temporal-setup")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["temporal", "setup"]
    assert "post-install" in job["metadata"]["annotations"]["helm.sh/hook"]


def test_the_generated_webhook_certificate_is_trusted_by_the_registration(chart: helm.Chart) -> None:
    docs = rendered(chart, {})
    secret = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-webhook-tls")
    hook = of(docs, "ValidatingWebhookConfiguration")[0]["webhooks"][0]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert hook["clientConfig"]["service"] == {"name": "agentrun-api", "namespace": NS, "port": 443,
                                               "path": "/admission/agentruns"}
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"agentrun-api.{NS}.svc" in names
    service = next(s for s in of(docs, "Service") if s["metadata"]["name"] == "agentrun-api")
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("http", 80, "http"), ("webhook", 443, "webhook")}
    api = component_env(docs, "api")
    assert api["AGENTRUN_WEBHOOK_PORT"]["value"] == "8443"
    assert api["AGENTRUN_TLS_CERT_FILE"]["value"] == "/etc/agentrun/webhook-tls/tls.crt"


def test_cert_manager_issues_the_certificate_and_injects_its_ca(chart: helm.Chart) -> None:
    docs = rendered(chart, {"webhook": {"certManager": {"enabled": True}}})
    assert not [s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-webhook-tls"]
    cert = of(docs, "Certificate")[0]
    assert cert["spec"]["secretName"] == "agentrun-webhook-tls"
    assert f"agentrun-api.{NS}.svc" in cert["spec"]["dnsNames"]
    vwc = of(docs, "ValidatingWebhookConfiguration")[0]
    assert vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/agentrun-webhook-tls"
    assert "caBundle" not in vwc["webhooks"][0]["clientConfig"]


def test_without_the_webhook_nothing_of_it_is_rendered(chart: helm.Chart) -> None:
    docs = rendered(chart, {"webhook": {"enabled": False}})
    assert of(docs, "ValidatingWebhookConfiguration") == [] and of(docs, "MutatingWebhookConfiguration") == []
    assert [r["metadata"]["name"] for r in of(docs, "ClusterRole")] == [
        "agentrun-worker", "agentrun-bridge", "agentrun-api", "agentrun-worker-runtimeclasses",
        # roles.yaml: the roles people are bound to, and the API's reviews (no part of the webhook)
        "agentrun-viewer", "agentrun-editor", "agentrun-approver", "agentrun-api-reviews"]
    assert component_env(docs, "bridge")["AGENTRUN_VERDICT_WEBHOOK"]["value"] == ""  # annotation verdicts: unverified
    assert "AGENTRUN_WEBHOOK_PORT" not in component_env(docs, "api")
    service = next(s for s in of(docs, "Service") if s["metadata"]["name"] == "agentrun-api")
    assert [p["name"] for p in service["spec"]["ports"]] == ["http"]


def test_both_webhooks_are_registered_with_the_certificate_and_the_settings_that_tie_them_together(
        chart: helm.Chart) -> None:
    docs = rendered(chart, {})
    secret = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-webhook-tls")
    validating = of(docs, "ValidatingWebhookConfiguration")[0]["webhooks"]
    assert [(h["name"], h["sideEffects"], h["failurePolicy"]) for h in validating] == [
        ("agentruns.policy.agentrun.dev", "NoneOnDryRun", "Fail")]  # refusals write Events, never on a dry run
    mutating = of(docs, "MutatingWebhookConfiguration")
    assert [m["metadata"]["name"] for m in mutating] == ["agentrun-agentruns", "agentrun-agentruns-authors"]
    hooks = mutating[0]["webhooks"]
    assert [(h["name"], h["rules"][0]["operations"], h["failurePolicy"]) for h in hooks] == [
        ("created-by.agentrun.dev", ["CREATE"], "Fail"), ("verdicts.agentrun.dev", ["UPDATE"], "Fail")]
    for h in hooks:
        assert h["clientConfig"]["service"] == {"name": "agentrun-api", "namespace": NS, "port": 443,
                                                "path": "/admission/agentruns/mutate"}
        assert h["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert h["rules"][0]["resources"] == ["agentruns"] and h["sideEffects"] == "None"
    # Only verdict writes reach the Fail webhook (on clusters that evaluate matchConditions).
    assert "sympozium.ai/gate-verdict" in hooks[1]["matchConditions"][0]["expression"] and "matchConditions" not in hooks[0]
    assert component_env(docs, "bridge")["AGENTRUN_VERDICT_WEBHOOK"]["value"] == "agentrun-agentruns"
    # Each component's own ServiceAccount may carry an author onto what it creates for someone (models/authorship.py).
    for component in ("api", "worker", "bridge"):
        assert component_env(docs, "api")[f"AGENTRUN_TRUSTED__{component.upper()}"]["value"] == \
            f'["system:serviceaccount:{NS}:agentrun-{component}"]'
    # The author stamp on what hands runs something, under webhook.failurePolicy.
    (authors,) = mutating[1]["webhooks"]
    assert (authors["name"], authors["failurePolicy"], authors["clientConfig"]["service"]["path"]) == (
        "authors.agentrun.dev", "Fail", "/admission/authors/mutate")
    assert authors["rules"][0]["resources"] == ["agents", "sympoziuminstances", "skillpacks", "sympoziumschedules",
                                                "ensembles", "personapacks"]
    assert authors["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    # Fail closed by default (the checks above hold only at admission); Ignore when availability matters more.
    lenient = rendered(chart, {"webhook": {"failurePolicy": "Ignore"}})
    assert of(lenient, "MutatingWebhookConfiguration")[1]["webhooks"][0]["failurePolicy"] == "Ignore"
    assert of(lenient, "ValidatingWebhookConfiguration")[0]["webhooks"][0]["failurePolicy"] == "Ignore"
    relaxed = rendered(chart, {"webhook": {"verdictFailurePolicy": "Ignore"}})
    assert of(relaxed, "MutatingWebhookConfiguration")[0]["webhooks"][1]["failurePolicy"] == "Ignore"


def test_the_bridge_runs_two_replicas_under_a_disruption_budget(chart: helm.Chart) -> None:
    docs = rendered(chart, {})
    bridge = next(d for d in of(docs, "Deployment") if d["metadata"]["name"] == "agentrun-bridge")
    assert bridge["spec"]["replicas"] == 2
    pdb = next(p for p in of(docs, "PodDisruptionBudget") if p["metadata"]["name"] == "agentrun-bridge")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == bridge["spec"]["selector"]["matchLabels"]


def test_optional_network_policies_and_service_monitor(chart: helm.Chart) -> None:
    docs = rendered(chart, MATRIX["extras"][1])
    assert {p["metadata"]["name"] for p in of(docs, "NetworkPolicy")} == {
        "agentrun-default-deny", "agentrun-api", "agentrun-metrics"}
    assert of(docs, "ServiceMonitor") and of(docs, "Ingress")
    assert component_env(docs, "api")["AGENTRUN_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert of(rendered(chart, {}), "NetworkPolicy") == [] and of(rendered(chart, {}), "ServiceMonitor") == []


@pytest.mark.parametrize(("values", "complaint"), [
    ({"webhok": {"enabled": False}}, "webhok"),
    ({"webhook": {"failurePolicy": "Sometimes"}}, "failurePolicy"),
    ({"webhook": {"verdictFailurePolicy": "Never"}}, "verdictFailurePolicy"),
    ({"temporal": {"address": "no-port"}}, "address"),
    ({"watchNamespaces": ["Not_A_Namespace"]}, "watchNamespaces"),
    ({"worker": {"grantableRules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]}}, "verbs"),
    ({"worker": {"grantableClusterRules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["escalate"]}]}},
     "verbs"),
    ({"worker": {"agentRestarts": -1}}, "agentRestarts"),
])
def test_bad_values_are_refused_by_the_schema_naming_the_field(chart: helm.Chart, values: dict[str, Any],
                                                                complaint: str) -> None:
    with pytest.raises(helm.HelmError) as e:
        chart.render(values, name="agentrun", namespace=NS, is_install=True)
    assert complaint in str(e.value)


def test_the_charts_crds_are_the_generated_ones() -> None:
    generated = all_crds()
    assert {p.name for p in (CHART / "crds").glob("*.yaml")} == set(generated)
    for name, crd in generated.items():
        assert (CHART / "crds" / name).read_text() == render(crd)


def test_the_api_holds_no_rules_to_delegate_and_can_require_the_apiservers_client_certificate(
        chart: helm.Chart) -> None:
    """Runs created through the API are checked as its caller, not as its ServiceAccount (issue 27, hole 3): the API
    needs to hold nothing its runs' hooks get, and the chart no longer offers api.delegableRules."""
    docs = rendered(chart, {"webhook": {"clientCA": {"existingSecret": "apiserver-client-ca"}}})
    assert granted(docs, "api", None) == NEEDS["api"]
    with pytest.raises(Exception, match="delegableRules"):
        rendered(chart, {"api": {"delegableRules": []}})
    env = component_env(docs, "api")
    assert env["AGENTRUN_WEBHOOK_CLIENT_CA_FILE"]["value"] == "/etc/agentrun/webhook-client-ca/ca.crt"
    api = next(d for d in of(docs, "Deployment") if d["metadata"]["name"] == "agentrun-api")
    volumes = {v["name"]: v for v in api["spec"]["template"]["spec"]["volumes"]}
    assert volumes["webhook-client-ca"]["secret"]["secretName"] == "apiserver-client-ca"
    mounts = {m["name"]: m["mountPath"] for m in api["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["webhook-client-ca"] == "/etc/agentrun/webhook-client-ca"
    assert "AGENTRUN_WEBHOOK_CLIENT_CA_FILE" not in component_env(rendered(chart, {}), "api")


def test_the_agents_webhook_is_registered_for_agent_kinds_beside_the_runs_webhooks(chart: helm.Chart) -> None:
    docs = rendered(chart, {"watchNamespaces": ["team-a"]})
    config = next(c for c in of(docs, "ValidatingWebhookConfiguration")
                  if c["metadata"]["name"] == "agentrun-agentruns-agents")
    secret = next(s for s in of(docs, "Secret") if s["metadata"]["name"] == "agentrun-webhook-tls")
    hook, packs, schedules, warnings = config["webhooks"]
    assert hook["name"] == "agents.escalation.agentrun.dev" and hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"]["service"] == {"name": "agentrun-api", "namespace": NS, "port": 443,
                                              "path": "/admission/agents"}
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert hook["rules"] == [{"apiGroups": ["sympozium.ai"], "apiVersions": ["v1alpha1"],
                              "resources": ["agents", "sympoziuminstances"], "operations": ["CREATE", "UPDATE"],
                              "scope": "Namespaced"}]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a"]
    # Beside it, the warnings-only webhook for packs and Models: never Fail, whatever webhook.failurePolicy says.
    assert warnings["name"] == "definitions.warnings.agentrun.dev" and warnings["failurePolicy"] == "Ignore"
    assert warnings["clientConfig"]["service"]["path"] == "/admission/definitions"
    assert warnings["rules"][0]["resources"] == ["skillpacks", "personapacks", "ensembles", "models"]
    assert warnings["namespaceSelector"] == hook["namespaceSelector"]
    # Between them, the grants of packs and schedules checked against their author, under webhook.failurePolicy.
    for checked, path, resources in ((packs, "/admission/packs", ["skillpacks", "ensembles", "personapacks"]),
                                     (schedules, "/admission/schedules", ["sympoziumschedules"])):
        assert checked["failurePolicy"] == "Fail" and checked["clientConfig"]["service"]["path"] == path
        assert checked["rules"][0]["resources"] == resources
        assert checked["namespaceSelector"] == hook["namespaceSelector"]


def test_traces_and_prices_are_off_by_default_and_wired_when_set(chart: helm.Chart) -> None:
    """The control plane's OTLP exporter from otel.*, the worker's price ConfigMap readable by name alone, and the
    Grafana dashboard ConfigMap only when asked (README "Traces and cost")."""
    plain = rendered(chart, {})
    assert not [k for c in ("worker", "bridge", "api") for k in component_env(plain, c) if k.startswith("OTEL_")]
    assert "AGENTRUN_PRICES_CONFIG_MAP" not in component_env(plain, "worker")
    assert not [d for d in of(plain, "ConfigMap") if d["metadata"]["name"] == "agentrun-dashboard"]
    docs = rendered(chart, {"otel": {"endpoint": "http://collector.obs:4318", "env": {"OTEL_TRACES_SAMPLER_ARG": "0.1"}},
                            "worker": {"pricesConfigMap": "prices"}, "grafanaDashboard": {"enabled": True}})
    for component in ("worker", "bridge", "api"):
        env = component_env(docs, component)
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://collector.obs:4318"
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"]["value"] == "http/protobuf"
        assert env["OTEL_TRACES_SAMPLER_ARG"]["value"] == "0.1"
    assert component_env(docs, "worker")["AGENTRUN_PRICES_CONFIG_MAP"]["value"] == f"{NS}/prices"
    role = next(d for d in of(docs, "Role") if d["metadata"]["name"] == "agentrun-worker-prices")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["prices"],
                              "verbs": ["get"]}]
    dashboard = next(d for d in of(docs, "ConfigMap") if d["metadata"]["name"] == "agentrun-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["agentrun.json"])["panels"]
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    assert all(m in exprs for m in ("agentrun_run_cost_usd_total", "agentrun_run_tokens_total",
                                    "agentrun_otel_spans_dropped_total", "agentrun_runs_unpriced_total"))
