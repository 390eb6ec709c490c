"""The executor (agentrunner/executor.py) with real processes: the POSIX-sh script under dash and under busybox ash,
in a process whose environment holds no key, served to the agent's client (agentrunner/tools/shell.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from agentrunner.executor import wrap
from agentrunner.tools import ToolError
from agentrunner.tools.shell import OUTPUT_CHARS, Executor, argv_script, format_outcome, shell_tool
from agentrunner.tools.sidecar import build_argv
from tests.agentrunner.helpers import Dirs, executor, executor_env
from tests.waiting import wait_for

SHELLS = [("dash",), ("busybox", "sh")]
SHELL_IDS = ["dash", "busybox-ash"]


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path).make()


def client(dirs: Dirs, targets: tuple[str, ...] = ("tools",), start: float = 10.0) -> Executor:
    return Executor(dirs.exec_dir, targets, targets[0], start)


def serving(dirs: Dirs, target: str = "tools") -> None:
    wait_for(lambda: (dirs.exec_dir / target / "requests").exists(), timeout=20, what="the executor's FIFO")


@pytest.mark.parametrize("shell", SHELLS, ids=SHELL_IDS)
def test_a_command_runs_in_the_executors_process_with_its_env_and_the_workspace_as_cwd(dirs: Dirs,
                                                                                      shell: tuple[str, ...]) -> None:
    with executor(dirs, shell=shell, env=executor_env(TOOLS_MARK="from-the-tools-container")):
        serving(dirs)
        out = asyncio.run(client(dirs).run("tools", 'echo "$TOOLS_MARK $(pwd)"; env; echo oops >&2; exit 3\n',
                                           seconds=10, cwd=str(dirs.workspace)))
    assert out.exit_code == 3 and not out.timed_out
    assert out.stdout.startswith(f"from-the-tools-container {dirs.workspace}\n")
    assert "API_KEY" not in out.stdout  # the agent's environment never reaches the command
    assert out.stderr == "oops\n"


def test_the_key_in_the_agents_environment_never_reaches_a_command(dirs: Dirs) -> None:
    """The agent process holds the key; the command's `env` and every readable /proc/*/environ of its container
    do not (here: the executor's process tree, which is all the tools container would hold)."""
    os.environ["OPENAI_API_KEY"] = "sk-agent-secret-0123"  # in this (the agent's) process only
    try:
        with executor(dirs):
            serving(dirs)
            script = 'env; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null; done | grep -c sk- || true\n'
            out = asyncio.run(client(dirs).run("tools", script, seconds=10))
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert "sk-agent-secret-0123" not in out.stdout
    # (Other processes of this test machine are readable as root, so only the command's own tree is checked: the
    # pod test on localkube reads every /proc/*/environ of the tools container.)


@pytest.mark.parametrize("shell", SHELLS, ids=SHELL_IDS)
def test_parallel_calls_run_at_once(dirs: Dirs, shell: tuple[str, ...]) -> None:
    with executor(dirs, shell=shell):
        serving(dirs)
        ex = client(dirs)

        async def both() -> float:
            t0 = time.monotonic()
            outs = await asyncio.gather(*(ex.run("tools", f"sleep 1; echo {i}\n", seconds=10) for i in range(3)))
            assert [o.stdout for o in outs] == ["0\n", "1\n", "2\n"]
            return time.monotonic() - t0

        elapsed = asyncio.run(both())
    assert elapsed < 2.8, f"three 1 s commands took {elapsed:.1f}s: they did not run in parallel"


@pytest.mark.parametrize("no_setsid", [False, True], ids=["setsid", "proc-walk"])
@pytest.mark.parametrize("shell", SHELLS, ids=SHELL_IDS)
def test_a_timeout_kills_the_whole_process_group(dirs: Dirs, tmp_path: Path, shell: tuple[str, ...],
                                                 no_setsid: bool) -> None:
    env = executor_env()
    if no_setsid:  # an image without setsid: busybox's applets, less setsid, are all it has
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        busybox = shutil.which("busybox")
        assert busybox
        for applet in subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split():
            if applet != "setsid":
                (bin_dir / applet).symlink_to(busybox)
        env = {"PATH": str(bin_dir)}
    pids = dirs.workspace / "pids"
    with executor(dirs, shell=shell, env=env):
        serving(dirs)
        script = f"sleep 60 & echo $! > {pids}; sleep 61 & echo $! >> {pids}; wait\n"
        t0 = time.monotonic()
        out = asyncio.run(client(dirs).run("tools", script, seconds=1))
        elapsed = time.monotonic() - t0
    assert out.timed_out and out.exit_code != 0
    assert elapsed < 8
    for pid in map(int, pids.read_text().split()):
        wait_for(lambda: not _alive(pid), timeout=10, what=f"process {pid} killed")  # noqa: B023
    assert "timed out after 1s" in format_outcome(out, 1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_daemon_left_behind_does_not_hold_the_reply_back(dirs: Dirs) -> None:
    with executor(dirs):
        serving(dirs)
        t0 = time.monotonic()
        out = asyncio.run(client(dirs).run("tools", "sleep 30 & echo started\n", seconds=20))
    assert out.stdout == "started\n" and out.exit_code == 0
    assert time.monotonic() - t0 < 10


def test_output_of_many_megabytes_is_bounded_for_the_model(dirs: Dirs) -> None:
    with executor(dirs):
        serving(dirs)
        out = asyncio.run(client(dirs).run("tools", "head -c 5000000 /dev/zero | tr '\\0' x\n", seconds=30))
    assert out.stdout_bytes == 5_000_000 and len(out.stdout) <= 1024 * 1024
    text = format_outcome(out, 30)
    assert len(text) < OUTPUT_CHARS + 300 and "5000000 bytes of stdout" in text


def test_a_target_that_is_not_up_is_a_message_after_the_start_timeout(dirs: Dirs) -> None:
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=r"the 'tools' container is not running: its executor did not answer within 1s"):
        asyncio.run(client(dirs, start=1.0).run("tools", "true\n", seconds=5))
    assert time.monotonic() - t0 < 5
    assert not (dirs.exec_dir / "tools").exists()  # nothing was left for a container that never came


def test_a_target_that_comes_up_late_is_waited_for(dirs: Dirs) -> None:
    async def late() -> str:
        task = asyncio.ensure_future(client(dirs, start=20).run("tools", "echo late\n", seconds=5))
        await asyncio.sleep(0.5)  # the container is still starting
        with executor(dirs):
            out = await task
        return out.stdout

    (dirs.exec_dir / "tools").mkdir()
    assert asyncio.run(late()) == "late\n"


def test_execute_command_names_the_targets_and_refuses_an_unknown_one(dirs: Dirs) -> None:
    tool = shell_tool(Executor(dirs.exec_dir, ("tools", "k8s-ops"), "tools", 1))
    with pytest.raises(ToolError, match="unknown target 'nope': commands run in tools, k8s-ops"):
        asyncio.run(tool.run({"command": "true", "target": "nope"}))
    with executor(dirs, "k8s-ops"):
        serving(dirs, "k8s-ops")
        assert asyncio.run(tool.run({"command": "echo from-pack", "target": " K8S-Ops "})) == "from-pack\n"


def test_sidecar_tool_arguments_are_argv_never_shell(dirs: Dirs) -> None:
    entry = {"name": "echo_tool", "target": "tools", "exec": ["printf", "%s|"], "positionalArgs": ["a", "b"]}
    argv, stdin = build_argv(entry, {"a": "$(touch pwned); x", "b": "-n", "c": 1})
    assert argv == ["printf", "%s|", "--", "$(touch pwned); x", "-n"] and stdin is None
    with executor(dirs):
        serving(dirs)
        out = asyncio.run(client(dirs).run("tools", argv_script(["printf", "%s|", "$(touch pwned); x", "-n"]),
                                           seconds=5, cwd=str(dirs.workspace)))
    assert out.stdout == "$(touch pwned); x|-n|"
    assert not (dirs.workspace / "pwned").exists()


@pytest.mark.parametrize("shell", SHELLS, ids=SHELL_IDS)
def test_wrap_runs_the_containers_own_command_and_serves_beside_it(dirs: Dirs, shell: tuple[str, ...]) -> None:
    command = wrap("k8s-ops", ["sh", "-c", "echo own-command-started; exec sleep 30"], exec_dir=str(dirs.exec_dir),
                   shell=shell[0] if len(shell) == 1 else "sh")
    if shell == ("busybox", "sh"):
        command = ["busybox", *command]
    proc = subprocess.Popen(command, env=executor_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        serving(dirs, "k8s-ops")
        out = asyncio.run(client(dirs, ("k8s-ops",)).run("k8s-ops", "echo served\n", seconds=5))
        assert out.stdout == "served\n"
        assert proc.poll() is None  # the container's own command keeps running
    finally:
        proc.terminate()  # SIGTERM reaches the container's own command, whose exit ends the wrapper
        proc.wait(timeout=10)
    assert proc.returncode == 143  # the command's own exit status (killed by SIGTERM)
    assert proc.stdout is not None and b"own-command-started" in proc.stdout.read()


def test_the_executor_alone_ends_at_once_on_sigterm(dirs: Dirs) -> None:
    with executor(dirs) as proc:
        serving(dirs)
        t0 = time.monotonic()
        proc.terminate()
        proc.wait(timeout=5)
    assert time.monotonic() - t0 < 2 and proc.returncode == 0


def test_the_request_and_reply_files_are_group_shared_and_removed_after(dirs: Dirs) -> None:
    seen: list[int] = []
    with executor(dirs):
        serving(dirs)
        script = f'stat -c %a "$(dirname "$0")" "$(dirname "$0")/reply" > {dirs.workspace}/modes\n'
        asyncio.run(client(dirs).run("tools", script, seconds=5))
    seen = [int(m, 8) for m in (dirs.workspace / "modes").read_text().split()]
    assert seen[0] & 0o070 == 0o070 and seen[1] & 0o060 == 0o060
    assert [p.name for p in (dirs.exec_dir / "tools").iterdir()] == ["requests"]
