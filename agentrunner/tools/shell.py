"""``execute_command{command, target?, timeout?, workdir?}``: the agent's side of the executor protocol
(agentrunner/executor.py). The command runs in another container (the tools container, the sandbox, or the SkillPack
sidecar ``target`` names); this process only writes the request, sleeps on its reply FIFO, and reads the output.

Limits are Sympozium's: 30 s by default, 120 s at most; the model reads at most ``OUTPUT_CHARS`` of output.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import secrets
import shlex
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.config import ConfigError, comma_list
from agentrunner.duration import parse_duration_seconds
from agentrunner.executor import (
    EXEC_DIR,
    KILL_GRACE_SECONDS,
    OUTPUT_READ_BYTES,
    REQUESTS,
    TARGET_SANDBOX,
    TARGET_TOOLS,
)
from agentrunner.tools import Tool, ToolError, arg_int, arg_str, schema

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 30
MAX_TIMEOUT_SECONDS = 120
OUTPUT_CHARS = 8_000  # what the model reads of a command's output (Sympozium's cap)
DEFAULT_START_TIMEOUT = "30s"
REPLY_GRACE_SECONDS = KILL_GRACE_SECONDS + 10  # beyond the command's timeout, before the executor counts as gone
START_POLL_SECONDS = (0.02, 0.5)  # first and largest pause while a target's executor is not up yet
WORKSPACE = "/workspace"


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    stdout_bytes: int
    stderr_bytes: int


def normalize(target: str) -> str:
    """Sympozium's pkg/sidecartools.NormalizeTarget: lower case, no surrounding space."""
    return target.strip().lower()


@dataclass
class Executor:
    """The agent's client of the executors under `exec_dir`."""

    exec_dir: Path
    targets: tuple[str, ...]
    default_target: str
    start_timeout: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Executor:
        targets = [normalize(t) for t in comma_list(env.get("EXEC_TARGETS") or "")]
        targets += [normalize(t) for t in comma_list(env.get("SYMPOZIUM_SKILL_TARGETS") or "")]
        targets = list(dict.fromkeys(t for t in targets if t))
        default = normalize(env.get("EXEC_DEFAULT_TARGET") or "")
        if default and default not in targets:
            raise ConfigError(f"EXEC_DEFAULT_TARGET {default!r} is not one of EXEC_TARGETS ({', '.join(targets)})")
        if not default:
            default = next((t for t in (TARGET_SANDBOX, TARGET_TOOLS) if t in targets), "")
            if not default and len(targets) == 1:
                default = targets[0]
        text = (env.get("EXEC_START_TIMEOUT") or "").strip() or DEFAULT_START_TIMEOUT
        try:
            start = parse_duration_seconds(text)
        except ValueError as exc:
            raise ConfigError(f"EXEC_START_TIMEOUT: {exc}") from None
        return cls(Path(env.get("EXEC_DIR") or EXEC_DIR), tuple(targets), default, start)

    def target_of(self, requested: str) -> str:
        target = normalize(requested) or self.default_target
        if not target:
            raise ToolError(f"say which container runs the command: set 'target' to one of {', '.join(self.targets)}")
        if target not in self.targets:
            raise ToolError(f"unknown target {requested!r}: commands run in {', '.join(self.targets)}")
        return target

    async def run(self, target: str, script: str, *, seconds: int, cwd: str = WORKSPACE,
                  stdin: str | None = None) -> Outcome:
        """Run `script` in `target`'s container; raises ToolError when the target does not answer."""
        base = self.exec_dir / target
        rid = secrets.token_hex(8)
        req = base / rid
        loop = asyncio.get_running_loop()
        queue = await self._ready(base, target)
        try:
            timeout = seconds
            os.mkdir(req, 0o770)
            os.chmod(req, 0o2770)  # group-shared with the executing container (fsGroup), whatever the umask
            for name, text in (("script", script), ("timeout", f"{timeout}\n"), ("cwd", f"{cwd}\n"),
                               *((("stdin", stdin),) if stdin is not None else ())):
                path = req / name
                path.write_text(text)
                os.chmod(path, 0o660)
            os.mkfifo(req / "reply", 0o660)
            os.chmod(req / "reply", 0o660)
        except OSError as exc:
            os.close(queue)
            shutil.rmtree(req, ignore_errors=True)
            raise ToolError(f"cannot reach the {target!r} container's executor ({base}): {exc.strerror}") from None
        reply = os.open(req / "reply", os.O_RDWR | os.O_NONBLOCK)  # read-write: never end-of-file, no busy loop
        try:
            try:
                os.write(queue, f"{rid}\n".encode())  # under PIPE_BUF: one atomic line among concurrent writers
            finally:
                os.close(queue)
            done: asyncio.Future[None] = loop.create_future()
            loop.add_reader(reply, lambda: None if done.done() else done.set_result(None))
            try:
                await asyncio.wait_for(done, timeout + REPLY_GRACE_SECONDS)
            except TimeoutError:
                raise ToolError(f"no answer from the {target!r} container within {timeout + REPLY_GRACE_SECONDS}s "
                                "(its executor stopped?)") from None
            finally:
                loop.remove_reader(reply)
            return _read_outcome(req)
        finally:
            os.close(reply)
            shutil.rmtree(req, ignore_errors=True)

    async def _ready(self, base: Path, target: str) -> int:
        """The target's request FIFO, open for writing: waits (with a deadline) for its executor to come up. Only
        this wait polls, and only while a container is starting."""
        deadline = time.monotonic() + self.start_timeout
        pause = START_POLL_SECONDS[0]
        while True:
            try:
                return os.open(base / REQUESTS, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    raise ToolError(f"cannot reach the {target!r} container's executor: {exc.strerror}") from None
                if time.monotonic() >= deadline:
                    raise ToolError(f"the {target!r} container is not running: its executor did not answer within "
                                    f"{self.start_timeout:g}s") from None
                await asyncio.sleep(pause)
                pause = min(pause * 2, START_POLL_SECONDS[1])


def _read_head(path: Path) -> tuple[str, int]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(OUTPUT_READ_BYTES)
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        return "", 0
    return data.decode("utf-8", errors="replace"), size


def _read_outcome(req: Path) -> Outcome:
    try:
        code = int((req / "exit").read_text().strip() or "1")
    except (OSError, ValueError):
        raise ToolError("the executor answered without an exit code") from None
    out, out_size = _read_head(req / "out")
    err, err_size = _read_head(req / "err")
    return Outcome(code, out, err, (req / "timedout").exists(), out_size, err_size)


def format_outcome(o: Outcome, timeout: int) -> str:
    """Sympozium's shape: stdout, then ``STDERR: ...``, then notes; cut at OUTPUT_CHARS with the sizes."""
    parts = []
    if o.stdout:
        parts.append(o.stdout)
    if o.stderr:
        parts.append("STDERR: " + o.stderr)
    text = "\n".join(parts) or "(no output)"
    if len(text) > OUTPUT_CHARS:
        text = text[:OUTPUT_CHARS] + (f"\n... (output truncated: {o.stdout_bytes} bytes of stdout, {o.stderr_bytes} "
                                      "of stderr; redirect it to a file under /workspace and read_file it)")
    if o.timed_out:
        text += f"\n(command timed out after {timeout}s and was killed)"
    if o.exit_code != 0:
        text += f"\n(exit code: {o.exit_code})"
    return text


def argv_script(argv: list[str]) -> str:
    """A script that only runs `argv`: each argument single-quoted, so no value can become shell syntax."""
    return "exec " + " ".join(shlex.quote(a) for a in argv) + "\n"


def shell_tool(executor: Executor) -> Tool:
    async def run(args: dict[str, Any]) -> str:
        command = arg_str(args, "command")
        if not command.strip():
            raise ToolError("argument 'command' is empty")
        timeout = arg_int(args, "timeout", DEFAULT_TIMEOUT_SECONDS) or DEFAULT_TIMEOUT_SECONDS
        timeout = max(1, min(timeout, MAX_TIMEOUT_SECONDS))
        target = executor.target_of(arg_str(args, "target", required=False))
        workdir = arg_str(args, "workdir", required=False) or WORKSPACE
        outcome = await executor.run(target, command + "\n", seconds=timeout, cwd=workdir)
        return format_outcome(outcome, timeout)

    targets = ", ".join(executor.targets)
    return Tool(
        "execute_command",
        "Run a shell command (bash when the container has it, else sh) in a container of this pod that shares "
        f"{WORKSPACE}: one of {targets} (default {executor.default_target or 'none: set target'}). SkillPack "
        "sidecars have their tools (e.g. kubectl) and their own permissions: set 'target' to the pack's name. "
        f"Runs in {WORKSPACE} by default; {DEFAULT_TIMEOUT_SECONDS}s timeout, at most {MAX_TIMEOUT_SECONDS}s.",
        schema({"command": {"type": "string", "description": "The shell command."},
                "target": {"type": "string", "description": f"Where to run it: {targets}."},
                "timeout": {"type": "integer", "description": f"Seconds (default {DEFAULT_TIMEOUT_SECONDS}, "
                                                              f"max {MAX_TIMEOUT_SECONDS})."},
                "workdir": {"type": "string", "description": f"Working directory (default {WORKSPACE})."}},
               ["command"]),
        run)
