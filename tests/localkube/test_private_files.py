"""What localkube writes is its user's alone (issue 27, hole 10): its state directory, the pods' directories (their
ServiceAccount tokens, Secrets, kubeconfigs and logs), the volumes' directory and the audit log; before, a pod's token
and log were readable by every user of the host."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from kubernetes import client

from localkube.testing import Handle
from tests.conftest import AUDIT_LOG
from tests.waiting import wait_for


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_pods_token_secret_kubeconfig_and_log_are_private_and_so_is_everything_above_them(
        localkube: Handle, kube: client.ApiClient, namespace: str) -> None:
    core: Any = client.CoreV1Api(kube)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"}, "stringData": {"password": "hunter2"}})
    pod = core.create_namespaced_pod(namespace, {"metadata": {"name": "p"}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo hello"],
                        "volumeMounts": [{"name": "creds", "mountPath": "/creds"}]}],
        "volumes": [{"name": "creds", "secret": {"secretName": "creds"}}]}})
    wait_for(lambda: core.read_namespaced_pod("p", namespace).status.phase == "Succeeded", timeout=60,
             what="the pod to run")
    state = localkube.state_dir
    pod_dir = state / "pods" / pod.metadata.uid
    assert mode(state) == 0o700 and mode(state / "pods") == 0o700 and mode(state / "volumes") == 0o700
    tokens = list(pod_dir.glob("volumes/kube-api-access-*/token"))
    secret = pod_dir / "volumes" / "creds" / "password"
    logs = list((pod_dir / "logs").glob("c-*.log"))
    assert tokens and logs and secret.read_text() == "hunter2"
    for path in [*tokens, secret, pod_dir / "localkube" / "kubeconfig", *logs, state / "kubeconfig",
                 state / "admin-token", state / AUDIT_LOG]:
        assert mode(path) & 0o077 == 0, f"{path.relative_to(state)} is {oct(mode(path))}"
    assert "hello" in logs[0].read_text()
