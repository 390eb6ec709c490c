"""`agentrun up` and `down` take --state-dir after the subcommand and publish DIR/kubeconfig."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"


def _agentrun(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


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
    finally:
        down = _agentrun("down", "--state-dir", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped worker" in down.stdout
    assert not (state / "pids.json").exists()
