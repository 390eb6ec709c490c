"""`agentrun up --in-cluster`: the control plane as pods, installed from the Helm chart.

The embedded stack normally runs the worker, the bridge and the API as host processes with the
admin kubeconfig. In-cluster mode installs `deploy/chart/agentrun` into localkube with Helm's own
engine instead, so the chart, its RBAC and its probes are exercised exactly as on a real cluster:
each component runs in a pod under its own ServiceAccount, reaches the API server through the
in-cluster configuration, and is authorised by localkube's RBAC against the chart's rules. Temporal
and NATS stay host processes, as an operator's existing Temporal and NATS would be.

The control-plane and agent images map to this checkout's own programs through localkube's image
map, so what runs in the pods is the code in front of you.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from kubernetes import client, config

from kube import Conflict, typed_errors
from worker.settings import DEFAULT_AGENT_IMAGE

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "chart" / "agentrun"
RELEASE = "agentrun"
NAMESPACE = "agentrun-system"
SELECTOR = f"app.kubernetes.io/instance={RELEASE}"


def image_tag() -> str:
    return version("agentrun")


def image_map() -> dict[str, list[str]]:
    """The chart's images as this checkout's programs (localkube runs an image's entrypoint + the pod's args)."""
    python = sys.executable
    agent = [python, "-m", "agentrunner"]
    return {f"agentrun:{image_tag()}": [python, "-m", "cli.main"], f"agentrun-agent:{image_tag()}": agent,
            DEFAULT_AGENT_IMAGE: agent}


NATS_SECRET = "agentrun-nats"


def ensure_nats_secret(kubeconfig: Path, token: str) -> None:
    """The host NATS's token, for the chart's worker (nats.auth), in the release's namespace (made if missing)."""
    api = kube_client(kubeconfig)
    core: Any = client.CoreV1Api(api)
    try:
        with contextlib.suppress(Conflict), typed_errors(f"create namespace {NAMESPACE}"):
            core.create_namespace({"metadata": {"name": NAMESPACE}})
        body = {"metadata": {"name": NATS_SECRET}, "stringData": {"token": token}}
        try:
            with typed_errors(f"create Secret {NATS_SECRET}"):
                core.create_namespaced_secret(NAMESPACE, body)
        except Conflict:
            with typed_errors(f"replace Secret {NATS_SECRET}"):
                core.replace_namespaced_secret(NATS_SECRET, NAMESPACE, body)
    finally:
        api.close()


def chart_values(*, temporal_address: str, nats_url: str, fallback_poll_seconds: int,
                 nats_secret: str = "") -> dict[str, Any]:
    """Values for localkube: the images above, the host's Temporal and NATS, and pods bound to their own IPs.

    localkube's pods share the host's network namespace, so two replicas binding 0.0.0.0 on one port would
    collide; `listenOnPodIP` makes each bind its own loopback pod IP (harmless on a real cluster)."""
    return {
        "image": {"repository": "agentrun", "tag": image_tag(), "pullPolicy": "IfNotPresent"},
        "agentImage": {"repository": "agentrun-agent", "tag": image_tag()},
        "temporal": {"address": temporal_address, "namespace": "default", "taskQueue": "agentrun"},
        "nats": {"url": nats_url, "auth": {"existingSecret": nats_secret, "type": "token"}},
        "listenOnPodIP": True,
        # Sympozium's k8s-ops example counts the nodes through its sidecar's clusterRBAC: the worker may grant that.
        "worker": {"grantableClusterRules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
                   "extraEnv": [{"name": "AGENTRUN_FALLBACK_POLL_SECONDS", "value": str(fallback_poll_seconds)},
                                {"name": "PYTHONUNBUFFERED", "value": "1"}]},
        "bridge": {"extraEnv": [{"name": "PYTHONUNBUFFERED", "value": "1"}]},
        "api": {"extraEnv": [{"name": "PYTHONUNBUFFERED", "value": "1"}]},
        # `agentrun up --otlp-endpoint`: the control plane's spans (the chart's OTEL_* variables).
        "otel": {"endpoint": os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")},
    }


def install_chart(kubeconfig: Path, values: dict[str, Any], *, timeout: int = 300) -> dict[str, Any]:
    """`helm upgrade --install` through Helm's Go library (the helm-python-sdk binding), no helm binary; the release
    (its `notes` are the chart's NOTES, rendered)."""
    try:
        import helm_python as helm
    except ImportError as e:  # pragma: no cover - the local extra brings it
        raise SystemExit("agentrun up --in-cluster needs Helm's engine: pip install 'agentrun[local]'") from e
    if not (CHART / "Chart.yaml").exists():
        raise SystemExit(f"the chart is not at {CHART}; --in-cluster runs from a checkout of agentrun")
    cfg = helm.Config(kubeconfig_path=str(kubeconfig), namespace=NAMESPACE)
    try:
        chart = helm.Chart.load(str(CHART))
        try:
            cfg.status(RELEASE)
        except helm.HelmError:
            return dict(cfg.install(chart, RELEASE, values, namespace=NAMESPACE, create_namespace=True,
                                    timeout=timeout))
        return dict(cfg.upgrade(chart, RELEASE, values, namespace=NAMESPACE, timeout=timeout))
    finally:
        cfg.close()


def _items(list_fn: Any, selector: str) -> list[dict[str, Any]]:
    """A list as plain JSON: what is read of it is a few fields, not the typed models."""
    resp = list_fn(NAMESPACE, label_selector=selector, _preload_content=False)
    return list(json.loads(resp.data).get("items", []))


def wait_available(api: client.ApiClient, *, timeout: float = 180) -> None:
    """Every Deployment of the release reports all its replicas available (what `kubectl rollout status` checks)."""
    deadline = time.monotonic() + timeout
    pending: list[str] = ["no Deployment yet"]
    while time.monotonic() < deadline:
        deployments = _items(client.AppsV1Api(api).list_namespaced_deployment, SELECTOR)
        pending = [] if deployments else ["no Deployment yet"]
        for d in deployments:
            want = d["spec"].get("replicas", 1)
            st = d.get("status", {})
            if st.get("observedGeneration", 0) < d["metadata"].get("generation", 0) \
                    or st.get("availableReplicas", 0) < want or st.get("updatedReplicas", 0) < want:
                pending.append(f"{d['metadata']['name']} ({st.get('availableReplicas', 0)}/{want} available)")
        if not pending:
            return
        time.sleep(0.5)
    raise SystemExit(f"the control plane did not become available in {timeout:.0f}s: {', '.join(pending)}; "
                     f"see `kubectl -n {NAMESPACE} get pods`")


def api_endpoint(api: client.ApiClient) -> tuple[str, str]:
    """The API Service's URL (its cluster IP is reachable from this host on localkube) and a bearer token."""
    core = client.CoreV1Api(api)
    services = _items(core.list_namespaced_service, SELECTOR + ",app.kubernetes.io/component=api")
    svc = next(s for s in services if s["spec"].get("clusterIP") not in (None, "None"))
    port = next(p for p in svc["spec"]["ports"] if p.get("name") == "http")
    url = f"http://{svc['spec']['clusterIP']}:{port['port']}"
    token = ""
    for secret in _items(core.list_namespaced_secret, SELECTOR + ",app.kubernetes.io/component=api-tokens"):
        for value in (secret.get("data") or {}).values():
            text = base64.b64decode(value).decode()
            token = token or next((line.split()[0] for line in text.splitlines()
                                   if line.strip() and not line.startswith("#")), "")
    return url, token


def kube_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(str(kubeconfig))


__all__ = ["CHART", "NAMESPACE", "NATS_SECRET", "RELEASE", "api_endpoint", "chart_values", "ensure_nats_secret",
           "image_map", "install_chart", "kube_client", "wait_available"]
