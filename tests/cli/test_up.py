"""`agentrun up` and `down` take --state-dir after the subcommand and publish DIR/kubeconfig; the embedded stack
registers the API's admission webhooks in localkube, so it is protected as a cluster is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"


def _agentrun(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=60, input=input)


def _assert_webhooks_protect_the_stack(kubeconfig: Path, info: dict[str, Any]) -> None:
    assert info["webhook"].startswith("https://127.0.0.1:")
    for kind, paths in (("validatingwebhookconfigurations", ["/admission/agentruns"]),
                        ("mutatingwebhookconfigurations", ["/admission/agentruns/mutate"] * 2)):
        got = _kubectl(kubeconfig, "get", kind, "agentrun-agentruns", "-o", "json")
        assert got.returncode == 0, got.stderr
        hooks = json.loads(got.stdout)["webhooks"]
        assert [h["clientConfig"]["url"] for h in hooks] == [info["webhook"] + p for p in paths]
        assert all(h["clientConfig"]["caBundle"] for h in hooks)
    # A verdict given at creation is refused by the API's webhook, through localkube.
    run: dict[str, Any] = {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                           "metadata": {"name": "early", "namespace": "default",
                                        "annotations": {"sympozium.ai/gate-verdict": '{"action": "approve"}'}},
                           "spec": {"agentRef": "helper", "task": "t"}}
    made = _kubectl(kubeconfig, "create", "-f", "-", input=json.dumps(run))
    assert made.returncode != 0
    assert "denied the request: a verdict cannot be given at creation" in made.stderr, made.stderr
    # Without one, the creator is stamped: localkube's admin, who ran kubectl.
    del run["metadata"]["annotations"]
    made = _kubectl(kubeconfig, "create", "-f", "-", "-o", "json", input=json.dumps(run))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["metadata"]["annotations"]["agentrun.dev/created-by"] == "admin"


def test_up_and_down_accept_the_state_dir_after_the_subcommand(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    up = _agentrun("up", "--state-dir", str(state), "--detach")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubeconfig = state / "kubeconfig"
        assert kubeconfig.exists()
        info = json.loads((state / "endpoints.json").read_text())
        assert info["kubeconfig"] == str(kubeconfig)
        assert f"export KUBECONFIG={kubeconfig}" in up.stdout
        got = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "crd", "-o", "name"],
                             capture_output=True, text=True, timeout=60)
        assert got.returncode == 0, got.stderr
        assert "customresourcedefinition.apiextensions.k8s.io/agentruns.sympozium.ai" in got.stdout.split()
        _assert_webhooks_protect_the_stack(kubeconfig, info)
    finally:
        down = _agentrun("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped worker" in down.stdout
    assert not (state / "pids.json").exists()
