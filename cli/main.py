"""The `agentrun` command line.

For now it carries the demo of the embedded stack: start localkube and run a Job through it
with the real `kubernetes` client and the real `kubectl`. Later commands (up, down, apply,
list, get, logs) join here.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from localkube.testing import running_localkube

DEMO_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [{
                    "name": "fetch",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "echo 'context fetched by the init container' > /workspace/context.txt"],
                    "volumeMounts": [{"name": "work", "mountPath": "/workspace"}],
                }],
                "containers": [{
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", 'echo "pod $HOSTNAME read: $(cat /workspace/context.txt)"; '
                                            "kubectl get job hello -o jsonpath='{.metadata.name}' 2>&1 | "
                                            "sed 's/^/kubectl as the pod: /'; echo"],
                    "volumeMounts": [{"name": "work", "mountPath": "/workspace"}],
                }],
                "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": "hello-workspace"}}],
            }
        },
    },
}

DEMO_PVC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "hello-workspace", "namespace": "default"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


def _kubectl() -> str:
    venv_kubectl = Path(sys.executable).parent / "kubectl"
    return str(venv_kubectl) if venv_kubectl.exists() else (shutil.which("kubectl") or "kubectl")


def demo(state_dir: Path) -> int:
    """Start localkube, run a Job whose init container and container share a PVC, print the outcome."""
    if state_dir.exists():
        shutil.rmtree(state_dir)
    with running_localkube(state_dir, job_backoff_seconds=1.0) as lk:
        print(f"localkube is serving at {lk.url}; kubeconfig: {lk.kubeconfig}")
        api_client = config.new_client_from_config(str(lk.kubeconfig))
        core = client.CoreV1Api(api_client)
        batch = client.BatchV1Api(api_client)
        core.create_namespaced_persistent_volume_claim("default", DEMO_PVC)  # type: ignore[arg-type]
        job = api_client.sanitize_for_serialization(
            batch.create_namespaced_job("default", DEMO_JOB))  # type: ignore[arg-type]
        print(f"created job/{job['metadata']['name']} (uid {job['metadata']['uid']})")
        outcome = _wait_job(batch, "hello", timeout=120)
        env = {**os.environ, "KUBECONFIG": str(lk.kubeconfig)}
        kubectl = _kubectl()
        for args in (["get", "jobs,pods,pvc"], ["logs", "job/hello", "-c", "main"]):
            out = subprocess.run([kubectl, *args], env=env, capture_output=True, text=True, timeout=60)
            print(f"$ kubectl {' '.join(args)}\n{out.stdout}{out.stderr}")
        print(f"job/hello: {outcome}")
        return 0 if outcome == "Complete" else 1


def _wait_job(batch: Any, name: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    w = watch.Watch()
    while time.monotonic() < deadline:
        for ev in w.stream(batch.list_namespaced_job, "default", field_selector=f"metadata.name={name}",
                           timeout_seconds=max(1, int(deadline - time.monotonic()))):
            for c in ev["object"].status.conditions or []:
                if c.type in ("Complete", "Failed") and c.status == "True":
                    w.stop()
                    return str(c.type)
    return "timed out"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentrun", description="Run AI agents on Kubernetes with Temporal.")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="start localkube and run a Job through it")
    d.add_argument("--state-dir", type=Path, default=Path(".state/demo"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.command == "demo":
        return demo(args.state_dir.resolve())
    return 2


if __name__ == "__main__":
    sys.exit(main())
