"""Deployments, ReplicaSets, Services, pod networking and in-cluster configuration in localkube, through the real
`kubernetes` client and `kubectl`: what a Helm chart of a control plane needs from a cluster.

The pods run a small Python HTTP server bound to their own pod IP (downward API), answering /healthz and
/readyz (503 until a file exists in a hostPath control directory, so the test decides when a pod is ready)."""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from localkube.network import SERVICE_NET
from localkube.testing import running_localkube
from tests.conftest import Kubectl
from tests.waiting import wait_for

Obj = dict[str, Any]
PY = sys.executable

SERVER = textwrap.dedent('''
    import os, http.server
    ctl = os.environ.get("CTL", "")
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = os.environ["POD_NAME"]
            ready = not ctl or os.path.exists(os.path.join(ctl, "ready-" + name)) or os.path.exists(
                os.path.join(ctl, "ready-all"))
            code = 503 if self.path == "/readyz" and not ready else 200
            body = f"{name} {os.environ.get('VERSION', '')}".encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    http.server.HTTPServer((os.environ["POD_IP"], 8080), H).serve_forever()
''')


def deployment(name: str, *, replicas: int = 2, version: str = "v1", ctl: Path | None = None,
               probe: bool = True) -> Obj:
    labels = {"app": name}
    c: Obj = {"name": "web", "image": "python:3", "command": [PY, "-c", SERVER],
              "ports": [{"name": "http", "containerPort": 8080}],
              "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                      {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                      {"name": "VERSION", "value": version}, {"name": "CTL", "value": "/ctl" if ctl else ""}]}
    spec: Obj = {"containers": [c], "terminationGracePeriodSeconds": 1}
    if probe:
        c["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 1,
                               "failureThreshold": 1}
        c["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 2}
    if ctl is not None:
        c["volumeMounts"] = [{"name": "ctl", "mountPath": "/ctl"}]
        spec["volumes"] = [{"name": "ctl", "hostPath": {"path": str(ctl)}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def service(name: str, app: str, port: int = 80) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": port, "targetPort": "http"}]}}


def _d(apps: Any, ns: str, name: str) -> Any:
    return apps.read_namespaced_deployment(name, ns)


def available(apps: Any, ns: str, name: str, want: int) -> Any:
    d = _d(apps, ns, name)
    st = d.status
    if (st.observed_generation or 0) >= d.metadata.generation and (st.available_replicas or 0) == want \
            and (st.updated_replicas or 0) == want and (st.replicas or 0) == want:
        return d
    return None


def pods_of(core: Any, ns: str, app: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(ns, label_selector=f"app={app}").items
            if not p.metadata.deletion_timestamp]


@pytest.fixture
def apps(kube: client.ApiClient) -> Any:
    return client.AppsV1Api(kube)


@pytest.fixture
def core(kube: client.ApiClient) -> Any:
    return client.CoreV1Api(kube)


def test_a_deployment_keeps_its_replicas_through_a_replicaset(apps: Any, core: Any, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", probe=False))
    d = wait_for(lambda: available(apps, namespace, "web", 2), timeout=30, what="2 available replicas")
    (rs,) = apps.list_namespaced_replica_set(namespace).items
    h = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{h}"
    assert rs.metadata.owner_references[0].uid == d.metadata.uid
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    pods = pods_of(core, namespace, "web")
    assert len(pods) == 2 and all(p.metadata.name.startswith(f"web-{h}-") for p in pods)
    assert len({p.status.pod_ip for p in pods}) == 2, "each pod has an address of its own"
    conditions = {c.type: (c.status, c.reason) for c in d.status.conditions}
    assert conditions["Available"] == ("True", "MinimumReplicasAvailable")
    assert conditions["Progressing"] == ("True", "NewReplicaSetAvailable")

    victim = pods[0].metadata.name
    core.delete_namespaced_pod(victim, namespace)
    wait_for(lambda: len([p for p in pods_of(core, namespace, "web") if p.metadata.name != victim
                          and p.status.phase == "Running"]) == 2, timeout=30, what="a replacement pod")
    wait_for(lambda: available(apps, namespace, "web", 2), timeout=30, what="2 available again")


def test_a_new_template_rolls_to_a_new_replicaset(apps: Any, core: Any, namespace: str, kubectl: Kubectl) -> None:
    apps.create_namespaced_deployment(namespace, deployment("roll", probe=False))
    wait_for(lambda: available(apps, namespace, "roll", 2), timeout=30, what="the first rollout")
    apps.patch_namespaced_deployment("roll", namespace, {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "env": [{"name": "VERSION", "value": "v2"}]}]}}}})
    done = kubectl("rollout", "status", "deployment/roll", "-n", namespace, "--timeout=60s", timeout=90)
    assert done.returncode == 0, done.stderr
    assert 'deployment "roll" successfully rolled out' in done.stdout
    rses: dict[str, Any] = {rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs
            for rs in apps.list_namespaced_replica_set(namespace).items}
    assert set(rses) == {"1", "2"}
    assert rses["1"].spec.replicas == 0 and rses["2"].spec.replicas == 2
    new_hash = rses["2"].metadata.labels["pod-template-hash"]
    wait_for(lambda: {p.metadata.labels["pod-template-hash"] for p in pods_of(core, namespace, "roll")} == {new_hash},
             timeout=30, what="only pods of the new template")
    listed = kubectl("get", "deploy,rs,svc,endpoints,pods", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines() if line.strip()}
    assert rows["deployment.apps/roll"][:3] == ["2/2", "2", "2"], listed.stdout  # READY UP-TO-DATE AVAILABLE
    assert rows[f"replicaset.apps/roll-{new_hash}"][:3] == ["2", "2", "2"], listed.stdout

    apps.delete_namespaced_deployment("roll", namespace)
    wait_for(lambda: not apps.list_namespaced_replica_set(namespace).items and not pods_of(core, namespace, "roll"),
             timeout=30, what="the ReplicaSets and pods to be collected")


def test_readiness_gates_endpoints_and_the_service_reaches_ready_pods_only(
        apps: Any, core: Any, namespace: str, tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    apps.create_namespaced_deployment(namespace, deployment("gated", ctl=ctl))
    svc = core.create_namespaced_service(namespace, service("gated", "gated"))
    ip = svc.spec.cluster_ip
    assert ipaddress.ip_address(ip) in SERVICE_NET, ip
    def running() -> list[Any] | None:
        ps = pods_of(core, namespace, "gated")
        return ps if len(ps) == 2 and all(p.status.phase == "Running" for p in ps) else None

    pods = wait_for(running, timeout=30, what="2 running pods")
    ep = wait_for(lambda: (e := core.read_namespaced_endpoints("gated", namespace)).subsets
                  and len(e.subsets[0].not_ready_addresses or []) == 2 and e, timeout=30, what="2 not-ready addresses")
    assert not ep.subsets[0].addresses
    assert ep.subsets[0].ports[0].port == 8080
    with pytest.raises(httpx.HTTPError):  # no ready endpoint: the connection is closed
        httpx.get(f"http://{ip}/", timeout=5)

    first = pods[0].metadata.name
    (ctl / f"ready-{first}").touch()
    wait_for(lambda: [a.target_ref.name for a in (core.read_namespaced_endpoints("gated", namespace).subsets[0]
                                                  .addresses or [])] == [first], timeout=30, what="one ready address")
    assert all(httpx.get(f"http://{ip}/", timeout=5).text.startswith(first) for _ in range(4))
    d = apps.read_namespaced_deployment("gated", namespace)
    assert d.status.ready_replicas == 1 and d.status.available_replicas == 1

    (ctl / "ready-all").touch()
    wait_for(lambda: available(apps, namespace, "gated", 2), timeout=30, what="both ready")
    served = {httpx.get(f"http://{ip}/", timeout=5).text.split()[0] for _ in range(8)}
    assert served == {p.metadata.name for p in pods}, "round-robin over the ready endpoints"


def test_pods_reach_services_by_their_dns_names(apps: Any, core: Any, kube: client.ApiClient, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment("named", replicas=1, probe=True))
    core.create_namespaced_service(namespace, service("named", "named", port=8000))
    wait_for(lambda: available(apps, namespace, "named", 1), timeout=30, what="the server")
    script = textwrap.dedent(f'''
        import urllib.request
        for host in ("named", "named.{namespace}", "named.{namespace}.svc", "named.{namespace}.svc.cluster.local"):
            print(host, urllib.request.urlopen(f"http://{{host}}:8000/", timeout=5).read().decode())
    ''')
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "client"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "python:3", "command": [PY, "-c", script]}]}}}}
    batch: Any = client.BatchV1Api(kube)
    batch.create_namespaced_job(namespace, job)
    done = wait_for(lambda: (j := batch.read_namespaced_job("client", namespace)).status.succeeded
                    or j.status.failed, timeout=60, what="the client Job")
    (pod,) = core.list_namespaced_pod(namespace, label_selector="job-name=client").items
    log = core.read_namespaced_pod_log(pod.metadata.name, namespace)
    assert done == 1, log
    assert log.count("named-") == 4


def test_in_cluster_configuration_acts_with_the_pods_service_account(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    with running_localkube(tmp_path / "lk", audit_log=audit) as lk:
        from kubernetes import config
        api = config.new_client_from_config(str(lk.kubeconfig))
        core: Any = client.CoreV1Api(api)
        rbac: Any = client.RbacAuthorizationV1Api(api)
        batch: Any = client.BatchV1Api(api)
        ns = "incluster"
        core.create_namespace({"metadata": {"name": ns}})
        core.create_namespaced_service_account(ns, {"metadata": {"name": "reader"}})
        rbac.create_namespaced_role(ns, {"metadata": {"name": "reader"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
        rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "reader"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]})
        script = textwrap.dedent(f'''
            import os
            from kubernetes import client, config
            os.environ.pop("KUBECONFIG", None)
            config.load_incluster_config()
            api = client.ApiClient()
            api.user_agent = "incluster-test/1"
            core = client.CoreV1Api(api)
            print("configmaps", len(core.list_namespaced_config_map("{ns}").items))
            try:
                core.list_namespaced_secret("{ns}")
            except client.exceptions.ApiException as e:
                print("secrets", e.status)
        ''')
        batch.create_namespaced_job(ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"},
                                         "spec": {"backoffLimit": 0, "template": {"spec": {
                                             "restartPolicy": "Never", "serviceAccountName": "reader",
                                             "containers": [{"name": "c", "image": "python:3",
                                                             "command": [PY, "-c", script]}]}}}})
        wait_for(lambda: (j := batch.read_namespaced_job("probe", ns)).status.succeeded or j.status.failed,
                 timeout=60, what="the in-cluster Job")
        (pod,) = core.list_namespaced_pod(ns, label_selector="job-name=probe").items
        log = core.read_namespaced_pod_log(pod.metadata.name, ns)
        assert "configmaps 1" in log and "secrets 403" in log, log
        api.close()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    mine = [e for e in lines if e["userAgent"] == "incluster-test/1"]
    assert {(e["user"], e["method"], e["path"], e["code"]) for e in mine} == {
        ("system:serviceaccount:incluster:reader", "GET", f"/api/v1/namespaces/{ns}/configmaps", 200),
        ("system:serviceaccount:incluster:reader", "GET", f"/api/v1/namespaces/{ns}/secrets", 403)}
    others = {e["user"] for e in lines if e["userAgent"] != "incluster-test/1"}
    assert "admin" in others, "the test's own requests are recorded as the admin's"


class _Hook(BaseHTTPRequestHandler):
    calls: list[str] = []

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Hook.calls.append(self.headers.get("Host", ""))
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": review["request"]["uid"], "allowed": False,
            "status": {"code": 403, "message": "refused by the service webhook"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: Any) -> None:
        pass


@pytest.fixture
def hook_server(tmp_path: Path, namespace: str) -> Iterator[tuple[int, str]]:
    """An HTTPS webhook on the host with a certificate for `hook.<namespace>.svc` only."""
    from tests.grpc_proxy import make_pki
    pki = make_pki(tmp_path / "pki", server_name=f"hook.{namespace}.svc")
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(pki.server_cert, pki.server_key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], base64.b64encode(pki.ca.read_bytes()).decode()
    server.shutdown()


def test_a_webhook_behind_a_service_is_called_through_it(kube: client.ApiClient, core: Any, namespace: str,
                                                          hook_server: tuple[int, str]) -> None:
    port, ca = hook_server
    # A Service without a selector and its Endpoints written by hand: the webhook runs outside the cluster.
    core.create_namespaced_service(namespace, {"metadata": {"name": "hook"}, "spec": {
        "ports": [{"name": "https", "port": 443, "targetPort": port}]}})
    core.create_namespaced_endpoints(namespace, {"metadata": {"name": "hook"}, "subsets": [
        {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})
    name = f"svc-hook-{uuid.uuid4().hex[:6]}"
    admission: Any = client.AdmissionregistrationV1Api(kube)
    admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [{
        "name": "svc.localkube.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"namespace": namespace, "name": "hook", "port": 443, "path": "/check"},
                         "caBundle": ca},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                   "operations": ["CREATE"]}]}]})
    try:
        with pytest.raises(ApiException) as e:
            core.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}})
        assert e.value.status == 403
        assert "refused by the service webhook" in str(e.value.body)
        assert _Hook.calls and ipaddress.ip_address(_Hook.calls[-1]) in SERVICE_NET
    finally:
        admission.delete_validating_webhook_configuration(name)
