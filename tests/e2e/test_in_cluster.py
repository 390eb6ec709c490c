"""`agentrun up --in-cluster`: the control plane installed from the Helm chart as pods, and the system still works.

The worker, the bridge and the API run as Deployments of the chart in localkube, each under its own ServiceAccount
and RBAC; Temporal and NATS stay host processes. A run with hooks and lifecycle RBAC succeeds, a gated run is
approved through the chart's API Service, a schedule ticks, an Ensemble is stamped out, the chart's admission
webhook refuses a run through its Service, and localkube's audit log shows every request of the three components
made with their own ServiceAccounts — never the admin's credential. The pods encrypt every payload with the key the chart made."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from localkube.network import SERVICE_NET
from models.codec import parse_keys
from tests.e2e.conftest import QUIET_CRON
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
G, V = "sympozium.ai", "v1alpha1"
SYSTEM = "agentrun-system"
COMPONENTS = ("worker", "bridge", "api")


def _agentrun(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state = tmp_path_factory.mktemp("in-cluster")
    up = _agentrun("up", "--in-cluster", "--detach", "--state-dir", str(state))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        info: dict[str, Any] = json.loads((state / "endpoints.json").read_text())
        info["client"] = config.new_client_from_config(info["kubeconfig"])
        info["up_stdout"] = up.stdout
        yield info
        info["client"].close()
    finally:
        down = _agentrun("down", "--state-dir", str(state), timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr


@pytest.fixture
def ns(cluster: dict[str, Any]) -> Iterator[str]:
    name = f"ic-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(cluster["client"]).create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
    yield name


def _apply(cluster: dict[str, Any], ns: str, *files: str) -> None:
    custom, core = client.CustomObjectsApi(cluster["client"]), client.CoreV1Api(cluster["client"])
    for f in files:
        for doc in yaml.safe_load_all((EXAMPLES / f).read_text()):
            if doc["kind"] == "ConfigMap":
                core.create_namespaced_config_map(ns, doc)
            else:
                plural = {"Agent": "agents", "AgentRun": "agentruns", "SympoziumSchedule": "sympoziumschedules"}
                custom.create_namespaced_custom_object(G, V, ns, plural[doc["kind"]], doc)


def _run(cluster: dict[str, Any], ns: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(cluster["client"]).get_namespaced_custom_object(  # type: ignore[assignment]
        G, V, ns, "agentruns", name)
    return obj


def _phase(cluster: dict[str, Any], ns: str, name: str, phases: tuple[str, ...] = ("Succeeded", "Failed")) -> str:
    def probe() -> str | None:
        got = (_run(cluster, ns, name).get("status") or {}).get("phase")
        return got if got in phases else None
    return wait_for(probe, timeout=120, what=f"{ns}/{name} to reach {phases}")


def test_the_control_plane_runs_as_the_charts_pods(cluster: dict[str, Any]) -> None:
    apps: Any = client.AppsV1Api(cluster["client"])
    ready = {d.metadata.name: (d.status.available_replicas, d.spec.replicas)
             for d in apps.list_namespaced_deployment(SYSTEM).items}
    assert ready == {"agentrun-worker": (1, 1), "agentrun-bridge": (2, 2), "agentrun-api": (1, 1)}
    core: Any = client.CoreV1Api(cluster["client"])
    pods = core.list_namespaced_pod(SYSTEM).items
    assert {p.spec.service_account_name for p in pods} == {f"agentrun-{c}" for c in COMPONENTS}
    assert ipaddress.ip_address(str(urlsplit(cluster["api"]).hostname)) in SERVICE_NET, cluster["api"]


def test_a_run_with_hooks_and_lifecycle_rbac_succeeds(cluster: dict[str, Any], ns: str) -> None:
    _apply(cluster, ns, "agent.yaml", "prerun-context.yaml", "postrun-report.yaml")
    assert _phase(cluster, ns, "summarize-release") == "Succeeded"
    assert "v2.4.0" in _run(cluster, ns, "summarize-release")["status"]["result"]
    assert _phase(cluster, ns, "weekly-report") == "Succeeded"
    core: Any = client.CoreV1Api(cluster["client"])
    report = core.read_namespaced_config_map("report-weekly-report", ns)
    assert report.data["team"] == "platform"  # written by the postRun hook with its lifecycle Role


def test_a_gated_run_is_approved_through_the_charts_api_service(cluster: dict[str, Any], ns: str) -> None:
    _apply(cluster, ns, "agent.yaml", "manual-approval.yaml")
    _phase(cluster, ns, "weekly-summary", ("AwaitingApproval", "Running", "Succeeded", "Failed"))
    wait_for(lambda: ((_run(cluster, ns, "weekly-summary").get("status") or {}).get("gate") or {}).get("state")
             == "pending", timeout=60, what="the gate to wait")
    auth = {"Authorization": f"Bearer {cluster['api_token']}"}
    r = httpx.post(f"{cluster['api']}/api/v1/runs/weekly-summary/gate-verdict", params={"namespace": ns},
                   json={"action": "approve", "reason": "looks right"}, headers=auth, timeout=30)
    assert r.status_code == 200, r.text
    assert _phase(cluster, ns, "weekly-summary") == "Succeeded"
    gate = _run(cluster, ns, "weekly-summary")["status"]["gate"]
    assert gate["decidedBy"] == "admin"  # the identity of the chart-generated token
    listed = httpx.get(f"{cluster['api']}/api/v1/runs", params={"namespace": ns}, headers=auth, timeout=30)
    assert {r["name"] for r in listed.json()} >= {"weekly-summary"}


def test_a_schedule_ticks(cluster: dict[str, Any], ns: str) -> None:
    _apply(cluster, ns, "agent.yaml")
    schedule = {"apiVersion": f"{G}/{V}", "kind": "SympoziumSchedule", "metadata": {"name": "beat"},
                "spec": {"agentRef": "demo-agent", "schedule": QUIET_CRON, "task": "heartbeat", "type": "heartbeat"}}
    client.CustomObjectsApi(cluster["client"]).create_namespaced_custom_object(G, V, ns, "sympoziumschedules", schedule)

    def first() -> str | None:
        out: Any = client.CustomObjectsApi(cluster["client"]).list_namespaced_custom_object(
            G, V, ns, "agentruns", label_selector="sympozium.ai/schedule=beat")
        return next((i["metadata"]["name"] for i in out["items"]), None)

    name = wait_for(first, timeout=60, what="the schedule's first tick")  # firstTick: immediate
    assert _phase(cluster, ns, name) == "Succeeded"


def test_an_ensemble_is_stamped_out_by_the_charts_bridge(cluster: dict[str, Any], ns: str) -> None:
    custom: Any = client.CustomObjectsApi(cluster["client"])
    ensemble = {"apiVersion": f"{G}/{V}", "kind": "Ensemble", "metadata": {"name": "pair"},
                "spec": {"enabled": True, "authRefs": [{"provider": "echo", "secret": ""}], "agentConfigs": [
                    {"name": "one", "systemPrompt": "You are one.", "model": "echo-1",
                     "schedule": {"cron": QUIET_CRON, "task": "t", "firstTick": "afterInterval"}}]}}
    custom.create_namespaced_custom_object(G, V, ns, "ensembles", ensemble)

    def ready() -> dict[str, Any] | None:
        status = custom.get_namespaced_custom_object(G, V, ns, "ensembles", "pair").get("status") or {}
        return status if status.get("phase") == "Ready" else None

    status = wait_for(ready, timeout=60, what="the chart's bridge to stamp the ensemble out")
    assert status["installedPersonas"] == [{"name": "one", "instanceName": "pair-one", "scheduleName":
                                            "pair-one-schedule"}]
    agent = custom.get_namespaced_custom_object(G, V, ns, "agents", "pair-one")
    assert agent["metadata"]["ownerReferences"][0]["kind"] == "Ensemble"
    custom.get_namespaced_custom_object(G, V, ns, "sympoziumschedules", "pair-one-schedule")


def test_the_charts_webhook_refuses_a_violating_run_through_its_service(cluster: dict[str, Any], ns: str) -> None:
    _apply(cluster, ns, "agent.yaml")
    run = {"apiVersion": f"{G}/{V}", "kind": "AgentRun", "metadata": {"name": "sneaky"},
           "spec": {"agentRef": "demo-agent", "task": "t", "env": {"LD_PRELOAD": "/tmp/evil.so"}}}
    with pytest.raises(ApiException) as e:
        client.CustomObjectsApi(cluster["client"]).create_namespaced_custom_object(G, V, ns, "agentruns", run)
    assert e.value.status == 403
    body = str(e.value.body)
    assert "LD_PRELOAD" in body and "agentruns.policy.agentrun.dev" in body


def test_a_console_session_is_a_secret_the_apis_own_account_keeps_in_its_namespace(cluster: dict[str, Any]) -> None:
    """The chart's API keeps console sessions as Secrets of agentrun-system under its own Role (no list): created at
    sign-in (after one sweep of expired ones), read on each page, deleted at sign-out; the audit test below finds
    none of those requests refused."""
    r = httpx.post(f"{cluster['api']}/signin", data={"token": cluster["api_token"], "next": "/runs"}, timeout=30)
    assert r.status_code == 303, r.text
    cookie = r.cookies["agentrun_session"]
    name = "agentrun-session-" + hashlib.sha256(cookie.encode()).hexdigest()
    core: Any = client.CoreV1Api(cluster["client"])
    secret = core.read_namespaced_secret(name, SYSTEM)
    assert secret.metadata.annotations["agentrun.dev/identity"] == "admin"
    page = httpx.get(f"{cluster['api']}/runs", params={"namespace": "default"}, cookies={"agentrun_session": cookie},
                     timeout=30)
    assert page.status_code == 200, page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text
    out = httpx.post(f"{cluster['api']}/signout", data={"csrf": csrf.group(1)}, cookies={"agentrun_session": cookie},
                     timeout=30)
    assert out.status_code == 303, out.text
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_secret(name, SYSTEM)
    assert gone.value.status == 404
    # The API's own account did it all, under the chart's Role: the sweep (a DELETE of the collection), the create, a
    # read per request, the delete; nothing refused.
    api_user = f"system:serviceaccount:{SYSTEM}:agentrun-api"
    secrets = [(e["method"], e["path"].rsplit("/secrets", 1)[1], e["code"])
               for e in map(json.loads, Path(cluster["audit_log"]).read_text().splitlines())
               if e["user"] == api_user and e["path"].startswith(f"/api/v1/namespaces/{SYSTEM}/secrets")]
    assert ("DELETE", "", 200) in secrets and ("POST", "", 201) in secrets
    assert ("GET", f"/{name}", 200) in secrets and ("DELETE", f"/{name}", 200) in secrets
    assert all(code < 400 for _, _, code in secrets), secrets


def test_every_control_plane_request_uses_its_own_service_account(cluster: dict[str, Any]) -> None:
    # After the tests above: the three components have done their whole job (runs, hooks, gate, schedule).
    entries = [json.loads(line) for line in Path(cluster["audit_log"]).read_text().splitlines()]
    by_component: dict[str, set[str]] = {c: set() for c in COMPONENTS}
    for e in entries:
        agent = e["userAgent"].split("/")[0]
        if agent.startswith("agentrun-"):
            by_component[agent.removeprefix("agentrun-")].add(e["user"])
    assert by_component == {c: {f"system:serviceaccount:{SYSTEM}:agentrun-{c}"} for c in COMPONENTS}
    # Nothing the control plane does was done with the admin credential: the admin (this test, helm, the CLI)
    # never created a Job, a lifecycle Role, a RoleBinding or the bridge's Lease.
    admin_writes = {(e["method"], e["path"]) for e in entries if e["user"] == "admin" and e["method"] == "POST"}
    for fragment in ("/jobs", "/roles", "/rolebindings", "/leases", "/persistentvolumeclaims"):
        assert not [w for w in admin_writes if w[1].endswith(fragment)], fragment
    worker_creates = {e["path"].rsplit("/", 1)[-1] for e in entries
                      if e["user"] == f"system:serviceaccount:{SYSTEM}:agentrun-worker" and e["method"] == "POST"}
    assert {"jobs", "roles", "rolebindings", "persistentvolumeclaims"} <= worker_creates
    assert not [e for e in entries if e["userAgent"].startswith("agentrun-") and e["code"] == 403]


def test_the_charts_pods_encrypt_payloads_with_the_key_the_chart_made(cluster: dict[str, Any], ns: str) -> None:
    _apply(cluster, ns, "agent.yaml", "prerun-context.yaml")
    assert _phase(cluster, ns, "summarize-release") == "Succeeded"
    secret: Any = client.CoreV1Api(cluster["client"]).read_namespaced_secret("agentrun-codec-keys", SYSTEM)
    keys = parse_keys(base64.b64decode(secret.data["keys"]).decode())
    wid = _run(cluster, ns, "summarize-release")["status"]["workflowId"]
    shown = subprocess.run([str(Path(sys.executable).parent / "temporal"), "workflow", "show", "--workflow-id", wid,
                            "--output", "json", "--address", cluster["temporal"]],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    started = json.loads(shown.stdout)["events"][0]["workflowExecutionStartedEventAttributes"]
    [payload] = started["input"]["payloads"]
    assert base64.b64decode(payload["metadata"]["encoding"]) == b"binary/encrypted"
    assert base64.b64decode(payload["metadata"]["encryption-key-id"]).decode() == keys.writing
    assert "summarize-release" not in base64.b64decode(payload["data"]).decode(errors="replace")
    # The chart's API decodes it for a caller with its token.
    decoded = httpx.post(cluster["api"] + "/codec/decode", json={"payloads": [payload]}, timeout=30,
                         headers={"Authorization": f"Bearer {cluster['api_token']}"})
    assert decoded.status_code == 200, decoded.text
    assert "summarize-release" in base64.b64decode(decoded.json()["payloads"][0]["data"]).decode()


def test_up_prints_the_charts_notes_as_helm_install_does(cluster: dict[str, Any]) -> None:
    out = cluster["up_stdout"]
    assert "agentrun 0.1.0 is installed in namespace agentrun-system (release agentrun)." in out, out
    assert "kubectl apply -f examples/agent.yaml -f examples/prerun-context.yaml" in out
