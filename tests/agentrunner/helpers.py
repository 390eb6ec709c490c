"""Running the agent program as the agent container runs it: ``python -m agentrunner`` in a subprocess with a clean
environment (no key unless a test gives one), its directories under a temp dir; and an executor (the POSIX-sh
script) as another process, standing in for the tools container."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.executor import SCRIPT

ROOT = Path(__file__).resolve().parents[2]
MARKER_LINE = re.compile(r"^__SYMPOZIUM_RESULT__(.*)__SYMPOZIUM_END__$", re.M)


@dataclass
class Dirs:
    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def skills(self) -> Path:
        return self.root / "skills"

    @property
    def exec_dir(self) -> Path:
        return self.root / "exec"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def ipc(self) -> Path:
        return self.root / "ipc"

    def make(self) -> Dirs:
        for d in (self.workspace, self.skills, self.exec_dir, self.ipc):
            d.mkdir(parents=True, exist_ok=True)
        return self


def agent_env(dirs: Dirs, task: str, **env: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "TASK": task,
            "WORKSPACE_DIR": str(dirs.workspace), "SKILLS_DIR": str(dirs.skills), "EXEC_DIR": str(dirs.exec_dir),
            "AGENT_IPC_DIR": str(dirs.ipc), "AGENT_CONTEXT_DIR": str(dirs.root / "context"), **env}


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        found = MARKER_LINE.findall(self.stdout)
        assert found, f"no result marker (exit {self.returncode}); stderr:\n{self.stderr[-4000:]}"
        data: dict[str, Any] = json.loads(found[-1])
        return data


RUN_SECONDS = 120  # a bound on a test's run, not a timing


def run_agent(dirs: Dirs, task: str, **env: str) -> Finished:
    proc = subprocess.run([sys.executable, "-m", "agentrunner"], env=agent_env(dirs, task, **env), cwd=ROOT,
                          capture_output=True, text=True, timeout=RUN_SECONDS, check=False)
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def start_agent(dirs: Dirs, task: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "agentrunner"], env=agent_env(dirs, task, **env), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def executor_env(**extra: str) -> dict[str, str]:
    """The executing container's environment: its own PATH and nothing of the agent's (no key)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}


@contextmanager
def executor(dirs: Dirs, target: str = "tools", *, shell: tuple[str, ...] = ("dash",), argv: tuple[str, ...] = (),
             env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """The executor for `target` as its own process (another container, as far as the agent can tell)."""
    shell = (shutil.which(shell[0]) or shell[0], *shell[1:])  # found on the test's PATH, whatever env's PATH is
    proc = subprocess.Popen([*shell, "-c", SCRIPT, "agentrun-exec", str(dirs.exec_dir / target), *argv],
                            env=env or executor_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
