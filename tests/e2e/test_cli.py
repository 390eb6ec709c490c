"""The `agentrun` command line against the whole stack: `-o json|yaml` parse, `--state-dir` after the command,
`apply --wait` shows the approve command while a gate waits, `get -w` prints a row per change, `approve` is
recorded as the API token's identity, `run` and `delete` go through the API, `logs` prints the agent's output."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cli.main import cli as cli_group
from cli.main import main as agentrun
from tests.e2e.conftest import API_TOKENS, Stack, agent, agent_run
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
ALICE = next(t for t, who in API_TOKENS.items() if who == "alice@example.com")


@pytest.fixture
def state_dir(api_server: str, stack: Stack, tmp_path: Path) -> Path:
    """A state directory as `agentrun up` leaves it, pointing at the test stack and its API (alice's token)."""
    (tmp_path / "endpoints.json").write_text(json.dumps({
        "api": api_server, "api_token": ALICE, "kubeconfig": str(stack.kube.kubeconfig),
        "temporal": stack.temporal.address}))
    return tmp_path


class Cli:
    """`agentrun ... --state-dir DIR -n NS` in-process: (exit code, stdout, stderr)."""

    def __init__(self, state_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.state_dir, self.namespace, self.capsys = state_dir, namespace, capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = agentrun([*args, "--state-dir", str(self.state_dir), "-n", self.namespace])
        out = self.capsys.readouterr()
        return code, out.out, out.err


@pytest.fixture
def cli(state_dir: Path, namespace: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(state_dir, namespace, capsys)


class Lines:
    """A subprocess's stdout lines as they come, read on a thread; waited for with deadlines."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_line(self, predicate: Callable[[str], bool], *, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"no line with {what} in {timeout}s; got:\n" + "\n".join(self.lines))

    def wait_exit(self, *, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        while (line := self._queue.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def columns(header: str, line: str) -> dict[str, str]:
    """A table row by its header's columns (a blank cell stays blank)."""
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return {n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}


@pytest.fixture
def spawn() -> Iterator[Callable[[list[str]], Lines]]:
    made: list[Lines] = []

    def start(args: list[str]) -> Lines:
        made.append(Lines(args))
        return made[-1]

    yield start
    for p in made:
        p.kill()


def test_apply_wait_then_list_get_and_logs_print_what_parses(cli: Cli, tmp_path: Path) -> None:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("plain", task="hello cli", cleanup="keep")]))
    code, out, err = cli("apply", "-f", str(manifest), "--wait", "--timeout", "120")
    assert code == 0, out + err
    assert "agent/helper created" in out and "agentrun/plain created" in out
    assert "agentrun/plain: Succeeded" in out and "result:\necho: hello cli" in out, out
    # list: a kind: List of the AgentRuns, as JSON and as YAML; a table by default.
    code, out, _ = cli("list", "-o", "json")
    listed = json.loads(out)
    assert code == 0 and listed["kind"] == "List" and [r["metadata"]["name"] for r in listed["items"]] == ["plain"]
    assert listed["items"][0]["status"]["phase"] == "Succeeded"
    as_yaml = yaml.safe_load(cli("list", "-o", "yaml")[1])
    # (The run's object may still change after Succeeded — finalizers, cleanup — so its identity is compared.)
    assert as_yaml["kind"] == "List" and [(r["metadata"]["uid"], r["status"]["phase"]) for r in as_yaml["items"]] == [
        (r["metadata"]["uid"], r["status"]["phase"]) for r in listed["items"]]
    code, out, _ = cli("list")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "AGENT", "PHASE", "GATE", "AGE"] and row.split()[:3] == [
        "plain", "helper", "Succeeded"]
    assert cli("list", "-o", "wide")[1].splitlines()[0].split()[5:] == ["MODEL", "ATTEMPT", "DECIDED", "BY",
                                                                        "TOKENS", "CACHED", "CREATED", "BY"]
    # get: the object, as JSON or YAML (the default).
    code, out, _ = cli("get", "plain", "-o", "json")
    got = json.loads(out)
    assert code == 0 and got["kind"] == "AgentRun" and got["metadata"]["name"] == "plain"
    for args in (["get", "plain"], ["get", "plain", "-o", "yaml"]):
        as_yaml = yaml.safe_load(cli(*args)[1])
        assert (as_yaml["kind"], as_yaml["metadata"]["uid"], as_yaml["spec"]) == ("AgentRun", got["metadata"]["uid"],
                                                                                 got["spec"])
    # logs: the agent's output, also when following a pod that has ended.
    for follow in ([], ["-f"]):
        code, out, err = cli("logs", "plain", *follow)
        assert code == 0 and "echo: hello cli" in out, (follow, out, err)
    # Shell completion offers the namespace's runs.
    words = f"agentrun --state-dir {cli.state_dir} -n {cli.namespace} logs pl"
    done = CliRunner().invoke(cli_group, env={"_AGENTRUN_COMPLETE": "bash_complete", "COMP_WORDS": words,
                                              "COMP_CWORD": str(len(words.split()) - 1)}, prog_name="agentrun")
    assert (done.exit_code, done.stdout) == (0, "plain,plain\n"), done.output
    # An unknown run is one line, not a traceback.
    for args in (["get", "ghost"], ["get", "ghost", "-w"], ["logs", "ghost"]):
        code, out, err = cli(*args)
        assert (code, out) == (1, "") and err == f'agentrun: agentrun/ghost: not found in namespace "{cli.namespace}"\n'
    code, _, err = cli("logs", "plain", "--hook", "nope")
    assert code == 1 and "has no hook 'nope'" in err


def test_get_watch_shows_the_phase_change_and_approve_is_recorded_as_the_tokens_identity(
        cli: Cli, stack: Stack, namespace: str, state_dir: Path, tmp_path: Path,
        spawn: Callable[[list[str]], Lines]) -> None:
    gate = {"name": "gate", "image": "busybox:1.36", "gate": True, "command": ["sh", "-c", "true"]}
    manifest = tmp_path / "gated.yaml"
    manifest.write_text(yaml.safe_dump_all([agent(), agent_run("waits", task="gated answer",
                                                                lifecycle={"postRun": [gate], "gateTimeout": "10m"})]))
    where = ["-n", namespace, "--state-dir", str(state_dir)]
    applied = spawn(["apply", "-f", str(manifest), "--wait", "--timeout", "120", *where])
    applied.wait_line(lambda line: line == "agentrun/waits created", timeout=30, what="the run created")
    watched = spawn(["get", "waits", "-w", *where])
    header = watched.wait_line(lambda line: line.startswith("NAME "), timeout=30, what="the header")
    assert header.split() == ["NAME", "AGENT", "PHASE", "GATE", "AGE"]

    def row(phase: str, gate: str) -> Callable[[str], bool]:
        return lambda line: (columns(header, line)["PHASE"], columns(header, line)["GATE"]) == (phase, gate)

    # apply --wait shows the exact command once the gate waits; the watch has a row for it by then.
    applied.wait_line(lambda line: f"`agentrun approve waits -n {namespace}`" in line, timeout=60,
                      what="the approve command")
    watched.wait_line(row("PostRunning", "pending"), timeout=30, what="the gate pending")
    code, out, err = cli("approve", "waits", "--reason", "looks right")
    assert (code, out) == (0, "agentrun/waits: gate approved by alice@example.com\n"), err
    watched.wait_line(row("Succeeded", "approved"), timeout=60, what="the run approved")
    assert watched.wait_exit(timeout=30) == 0, "the watch ends with the run"
    rows = [columns(header, line) for line in watched.lines[1:]]
    assert all(r["NAME"] == "waits" and r["AGENT"] == "helper" for r in rows), watched.lines
    phases = [r["PHASE"] for r in rows]
    assert len(set(phases)) >= 2 and phases[-1] == "Succeeded", watched.lines
    assert applied.wait_exit(timeout=60) == 0, applied.lines
    assert "agentrun/waits: Succeeded (gate approved)" in applied.lines and "echo: gated answer" in applied.lines
    st = (stack.get_run(namespace, "waits") or {})["status"]
    assert (st["gate"]["decidedBy"], st["gate"]["reason"]) == ("alice@example.com", "looks right")
    # A second verdict is refused by the API, with its detail.
    code, _, err = cli("approve", "waits")
    assert code == 1 and err.startswith("agentrun/waits: refused: ") and err.count("\n") == 1, err


def test_run_and_delete_go_through_the_api(cli: Cli, stack: Stack, namespace: str) -> None:
    stack.create(namespace, "agents", agent())
    task = "sleep:2 from the cli"
    code, out, err = cli("run", "helper", "--task", task, "--env", "GREETING=hi", "--model", "echo-2")
    assert code == 0, err
    name = out.removeprefix("agentrun/").removesuffix(" created\n")
    assert name.startswith("helper-") and out == f"agentrun/{name} created\n"
    # logs -f waits for the agent's pod and follows its log to the end.
    code, out, err = cli("logs", name, "-f")
    assert code == 0 and "echo: from the cli" in out, (out, err)
    run = stack.wait_phase(namespace, name, timeout=60)
    assert run["metadata"]["annotations"]["agentrun.dev/created-by"] == "alice@example.com"
    assert (run["spec"]["task"], run["spec"]["env"], run["spec"]["model"]["model"]) == (
        task, {"GREETING": "hi"}, "echo-2")
    assert run["status"]["phase"] == "Succeeded"
    assert cli("delete", name) == (0, f"agentrun/{name} deleted\n", "")
    wait_for(lambda: stack.get_run(namespace, name) is None, timeout=30, what="the run deleted")
    # The API's refusals, with its detail: unknown run or agent, a bad token.
    code, _, err = cli("delete", name)
    assert code == 1 and err == f'agentrun/{name}: refused: run "{name}" not found in namespace "{namespace}"\n'
    code, _, err = cli("run", "nobody", "--task", "t")
    assert code == 1 and 'agent "nobody" not found' in err and err.count("\n") == 1
    code, _, err = cli("delete", name, "--token", "wrong-token")
    assert code == 1 and err.startswith(f"agentrun/{name}: refused: ") and err.count("\n") == 1, err
